"""The benchmark runner `zfsnas-bench`: plan -> run -> store -> annotate.

matrix.py reads a TOML matrix into cells; planner.py turns cells into the exact zfs/fio argv lists;
guard.py refuses anything outside the scratch dataset; runner.py runs a plan through zfs.py,
fio.py, copy.py and probes.py; store.py keeps every result in SQLite; annotate.py talks to
Grafana; report.py prints the tables. The exporter reads the store through
`zfsnas.sources.benchdb`, never through this package.
"""
