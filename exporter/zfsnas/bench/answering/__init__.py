"""Answering from stored results: what each configuration measured, shown and judged. Reads the
store, writes nothing to it; runs nothing.

- report.py: one summary per configuration (median, spread and count of its repeats), grouped
  into one section per matrix;
- axes.py: what a set of configurations varies in, its readable values and their order, and the
  selectors that pick configurations;
- tables.py: the report's tables as Markdown and CSV;
- charts.py: the report's charts (PNG, SVG; matplotlib, the `report` extra);
- findings.py: what an experiment found, in at most five sentences, with the table they cite;
- document.py: the whole report as Markdown or CSV, findings first;
- html.py: the report as one self-contained HTML page;
- recommend.py: which dataset properties to choose, with the reason and how sure it is;
- compare.py: A against B, and a configuration's newest run against its history (the alert's rule);
- crystaldiskmark.py: CrystalDiskMark's text format, versions 5 to 8: written by the tables, read
  by client/'s importer.

Imports the store and statistics/; nothing of running/, client/ or predicting/.
"""
