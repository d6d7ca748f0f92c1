"""The benchmark store: the SQLite database of `zfsnas-bench`'s results, below both the bench wing
(which writes it and answers from it) and the exporter (whose `bench` collector serves it, and
whose `capture --anonymize` rehashes the configurations of a copy of it).

- configuration.py: what a benchmark configuration is, defined once (canonical form, id, labels,
  `differences`, a pool's layout); pure.
- schema.py: the tables, the figures a result carries, the typed rows read back, and what a
  stored value may be; opens no database.
- database.py: the writer (`Store`: create, check, migrate, every write) and the commands'
  read-only view (`ReadOnlyStore`).
- reader.py: the exporter's reader (`BenchDbReader`: one summary per configuration, read again
  only where the file changed) and whether a run is in progress.

It imports nothing from `zfsnas.bench`, the collectors or the wiring, only the sources' values
and `zpool status` parser. This file imports nothing: the exporter loads reader.py alone, and the
rest only when there is a database to read (its start-up stays light).
"""
