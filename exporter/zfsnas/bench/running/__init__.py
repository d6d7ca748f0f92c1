"""Running experiments: a matrix of dataset properties, workloads and module parameters, run on
children of a scratch dataset and measured, every result written to the store as it ends.

- matrix.py: a TOML matrix read and checked into cells;
- planner.py: cells -> the ordered steps of a run, with the exact zfs/fio argv lists and each
  cell's configuration (what `--dry-run` prints and the runner runs);
- guard.py: the scratch checks; the only maker of the `Cleared` that dataset changes and fio take;
- zfs.py: the runner's zfs/zpool commands (read, create, sync, destroy), through the guard;
- parameters.py: ZFS module parameters as an axis: read, check, change, always restore;
- session.py: a run's housekeeping around the runner (lock, what dead runs left, key file,
  outputs, queued annotations);
- runner.py: runs a plan cell by cell, measuring and storing each, and stops cleanly on signals;
- racing.py: `run --until-decided`: which configurations run again and when the race is decided;
- fio.py: runs a fio job and reads its JSON into figures;
- fiowatch.py: the watchdog fio runs under (`python -m zfsnas.bench.running.fiowatch`), so it
  never outlives the runner, and the sweep for leftovers;
- childenv.py: the environment a child gets (no secret reaches it);
- copy.py: the copy workload: a user's corpus copied into the child, timed;
- probes.py: CPU, per-disk bytes and write-throttle counters around a job;
- annotate.py: Grafana annotations of each cell, queued in the store when Grafana is away.

Imports the store, the sources and statistics/; nothing of answering/, client/ or predicting/.
"""
