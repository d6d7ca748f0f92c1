"""Generated home-NAS lives checked against the alert rules by real promtool (issue 37).

`nas` composes one life of one NAS from parts (power, exporter restarts, pools, scrubs, snapshots,
disks, the ARC, the host, relabels, benchmark runs) and, for a sick life, one fault with the
alert that must name it; `series` writes its series as promtool input; `check` batches many lives
into a few promtool runs and reads the invariants' violations back. `python -m tests.alerts.lives
--help` runs any number of them; tests/alerts/test_lives.py runs the fast suite.
"""
