"""The benchmark runner `zfsnas-bench`: plan -> run -> store -> annotate.

config.py defines what a configuration is (the one definition, also used by the exporter);
matrix.py reads a TOML matrix into cells; planner.py turns cells into the exact zfs/fio argv lists
and their configurations; guard.py refuses anything outside the scratch dataset; parameters.py
changes ZFS module parameters and always restores them; runner.py runs a plan through zfs.py,
fio.py, copy.py and probes.py; store.py keeps every result in SQLite; annotate.py talks to
Grafana; report.py prints the tables. The exporter reads the store through
`zfsnas.sources.benchdb` and imports only config.py from this package.
"""
