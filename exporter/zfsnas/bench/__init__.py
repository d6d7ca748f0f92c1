"""The benchmark runner `zfsnas-bench`: plan -> run -> store -> annotate.

matrix.py reads a TOML matrix into cells; planner.py turns cells into the exact zfs/fio argv lists
and their configurations; guard.py refuses anything outside the scratch dataset; parameters.py
changes ZFS module parameters and always restores them; session.py does a run's housekeeping
(lock, what dead runs left, key file, outputs, queued annotations) around runner.py, which runs a
plan through zfs.py, fio.py, copy.py and probes.py; annotate.py talks to Grafana; report.py prints
the tables. Every result is kept in the store (`zfsnas.store`, below this package: what a
configuration is, the schema, the writer and the exporter's reader). The exporter reads the store
through `zfsnas.store.reader` and imports nothing from this package.
"""
