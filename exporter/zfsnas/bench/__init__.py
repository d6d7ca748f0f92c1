"""The benchmark runner `zfsnas-bench`, arranged by job: plan -> run -> store -> answer.

The command line sits on top. cli.py is `zfsnas-bench` (flags, environment, defaults, what is
printed; it runs init, plan, run, restore and annotate --retry itself) and hands the other
commands to answer_commands.py (list, report, recommend, compare), client_commands.py (watch,
import) and predict_command.py (predict); options.py is the plumbing they share (range-checked
options, `--set` labels, one-line usage errors, output files that never overwrite a database).
Below it, one sub-package per job, each `__init__` naming its modules:

- running/: experiments run on a scratch dataset: a matrix planned into exact zfs/fio steps, run
  cell by cell under the guard's checks (module parameters always restored), raced with
  `--until-decided`, annotated in Grafana;
- answering/: answers from stored results: summaries, tables, charts, the HTML page, findings,
  recommend, compare, and CrystalDiskMark's text format;
- client/: experiments a client drives: `watch` measures from the NAS, `import` stores results
  measured elsewhere, and what a configuration takes from a dataset the runner did not create;
- predicting/: `predict`'s estimate of a corpus's on-disk size without writing a byte: OpenZFS's
  allocation model and its own LZ4;
- statistics/: what several jobs share: intervals and decisions (how sure a race, a pick or a
  prediction is) and sampling a corpus (predict's sample, a racing copy's order).

Arrows run down only: the command line -> client -> running and answering -> statistics, and
predicting -> statistics; running and answering never import each other (client takes the
CrystalDiskMark format from answering and the dataset and probe readers from running). Every job
keeps its results in the store (`zfsnas.store`, below this package: what a configuration is, the
schema, the writer and the exporter's reader). The exporter reads the store through
`zfsnas.store.reader` and imports nothing from this package (tests/test_import_graph.py).
"""
