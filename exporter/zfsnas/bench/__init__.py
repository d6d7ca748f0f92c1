"""The benchmark runner `zfsnas-bench`: plan -> run -> store -> annotate.

config.py names what a configuration is (defined once in `zfsnas.sources.benchconfig`, below
this package, with the store's schema and typed rows in `zfsnas.sources.benchschema`);
matrix.py reads a TOML matrix into cells; planner.py turns cells into the exact zfs/fio argv lists
and their configurations; guard.py refuses anything outside the scratch dataset; parameters.py
changes ZFS module parameters and always restores them; session.py does a run's housekeeping
(lock, what dead runs left, key file, outputs, queued annotations) around runner.py, which runs a
plan through zfs.py, fio.py, copy.py and probes.py; store.py keeps every result in SQLite; annotate.py talks to
Grafana; report.py prints the tables. The exporter reads the store through
`zfsnas.sources.benchdb`; what serves the metrics (wiring, server, scrape, collectors, sources)
imports nothing from this package. One import crosses over: `zfsnas-exporter capture --anonymize`
(anonymize.py) takes `Configuration` from config.py, the re-export of `zfsnas.sources.benchconfig`,
to rehash the configurations of the bench database it copies.
"""
