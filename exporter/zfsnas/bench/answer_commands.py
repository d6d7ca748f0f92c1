"""The commands that answer from stored results: list, report, recommend, compare.

They read the database through `store.ReadOnlyStore` and write nothing to it, whoever runs them
(a user who may only read the file included). A database that cannot be read, an unknown matrix
or id, a refused output file: one line, exit status 2, nothing changed. Nothing to answer with
(an empty database, no pick, a regression found): exit status 1.

Owns the flags and output of those commands; the answers come from report.py, tables.py,
charts.py, html.py, recommend.py and compare.py.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable

from . import charts, compare, crystaldiskmark, html, tables
from .axes import SelectorError, parse_selector
from .config import differs_text, look_alikes
from .options import OutputError, check_chart_dir, check_output_file, fraction, weight, write_output
from .recommend import RecommendError, parse_throughput, recommend
from .recommend import render as render_recommendation
from .report import Section, sections
from .store import ReadOnlyStore

log = logging.getLogger("zfsnas.bench")


class AnswerError(Exception):
    """A request the stored results cannot answer as asked; one line, exit status 2."""


def add_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    lst = sub.add_parser("list", parents=[common], help="list stored results (read-only)")
    lst.add_argument("--all", action="store_true", help="every result, not only the last 50")
    rep = sub.add_parser("report", parents=[common],
                         help="tables per matrix (Markdown, CSV or one HTML page with the charts); PNG/SVG charts")
    rep.add_argument("--matrix", default=None, help="only this matrix")
    rep.add_argument("--format", choices=("markdown", "csv", "html"), default="markdown")
    rep.add_argument("--output", "-o", default=None,
                     help="write the report to this file (never over a database; over another file with --force)")
    rep.add_argument("--force", action="store_true", help="replace an existing --output file (never a database)")
    rep.add_argument("--png", default=None, metavar="DIR", help="write every chart as PNG into DIR (needs matplotlib)")
    rep.add_argument("--svg", default=None, metavar="DIR", help="write every chart as SVG into DIR (needs matplotlib)")
    rep.add_argument("--baseline", default=None, metavar="NAME=VALUE",
                     help="space table: each configuration against its twin with this value (e.g. recordsize=128K); "
                          "default: the first configuration")
    rep.add_argument("--cdm-format", choices=crystaldiskmark.VERSIONS, default=None,
                     help="CrystalDiskMark lines as this version prints them (default: the version the results were "
                          "imported from, else 8)")
    rec = sub.add_parser("recommend", parents=[common],
                         help="which dataset properties to choose, for every matrix shape, and why")
    rec.add_argument("matrix", help="the matrix name (as `list` shows it)")
    rec.add_argument("--speed-weight", type=weight, default=0.5,
                     help="0 = space only, 1 = speed only (default 0.5: both count the same)")
    rec.add_argument("--min-throughput", default=None,
                     help="only configurations at least this fast: 2.5GbE (line rate), 300MB/s, 250MiB/s or MB/s")
    rec.add_argument("--workload", default=None, help="only this workload (as `report` names it: the job name)")
    cmp = sub.add_parser("compare", parents=[common],
                         help="A vs B (what differs, both sides' figures), or the regression verdict of one "
                              "configuration over time")
    cmp.add_argument("refs", nargs="*", metavar="A B",
                     help="run ids, configuration ids, matrices or MATRIX:NAME=VALUE cells (two; or one with --by)")
    cmp.add_argument("--by", default=None, metavar="AXIS",
                     help="within each matrix (or the one REF names): every value of AXIS against the baseline value "
                          "(e.g. --by volblocksize, --by layout, --by ram)")
    cmp.add_argument("--baseline", default=None, metavar="VALUE", help="with --by: the value the others are set against")
    cmp.add_argument("--max-drop", type=fraction, default=None,
                     help="regression threshold (default: bench_regression_max_drop of alerts/thresholds.toml, "
                          "the alert's)")
    cmp.add_argument("--format", choices=("markdown", "csv"), default="markdown")


def _store(args: argparse.Namespace) -> ReadOnlyStore:
    return ReadOnlyStore(args.db)


def _sections(store: ReadOnlyStore, matrix: str | None) -> list[Section]:
    """The sections asked for; an unknown matrix or an empty database says what exists."""
    known = store.matrices()
    if not known:
        raise AnswerError(f"{store.path} holds no complete result yet (zfsnas-bench run, watch or import add some)")
    if matrix is not None and matrix not in known:
        raise AnswerError(f"no complete results of matrix {matrix!r} in {store.path}; it has: {', '.join(known)}")
    return sections(store.results("complete", matrix))


def cmd_list(args: argparse.Namespace) -> int:
    store = _store(args)
    rows = store.results(status=None)
    if not args.all:
        rows = rows[-50:]
    configs = {r.config_id: r.configuration for r in rows}
    alikes = look_alikes(list(configs.values()))
    print("id\tstarted (UTC)\tstatus\tmatrix\tworkload\tconfig\tcompression\trecordsize\tencryption\tsize\tpool"
          "\tMB/s\tratio\tdiffers")
    for r in rows:
        labels = configs[r.config_id].labels
        mbs = "" if r.throughput_bytes_per_second is None else f"{r.throughput_bytes_per_second / 1e6:.1f}"
        ratio = "" if r.compressratio is None else f"{r.compressratio:.2f}"
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.started))
        print(f"{r.id}\t{when}\t{r.status}\t{r.matrix}\t{r.workload}\t{r.config_id}"
              f"\t{labels['compression']}\t{labels['recordsize']}\t{labels['encryption']}\t{r.size}\t{r.pool}"
              f"\t{mbs}\t{ratio}\t{differs_text(alikes[r.config_id])}")
    if not rows:
        print(f"(no results in {store.path})", file=sys.stderr)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    if (args.png or args.svg) and not charts.available():
        print(charts.INSTALL, file=sys.stderr)
        return 3
    try:
        baseline = parse_selector(args.baseline) if args.baseline else None
    except SelectorError as exc:
        raise AnswerError(f"--baseline: {exc}") from None
    output = check_output_file(args.output, args.force, [args.db]) if args.output else None
    chart_dirs = [(check_chart_dir(d), fmt) for d, fmt in ((args.png, "png"), (args.svg, "svg")) if d]
    store = _store(args)
    found = _sections(store, args.matrix)
    try:
        renderers: dict[str, Callable[[list[Section]], str]] = {
            "markdown": lambda s: tables.markdown(s, baseline, args.cdm_format),
            "csv": lambda s: tables.to_csv(s, baseline, args.cdm_format),
            "html": lambda s: html.page(s, baseline=baseline, cdm=args.cdm_format)}
        text = renderers[args.format](found)
    except SelectorError as exc:
        raise AnswerError(f"--baseline {args.baseline}: {exc}") from None
    if output is not None:
        write_output(output, text)
        log.info("report written to %s", output)
    else:
        sys.stdout.write(text)
    for directory, fmt in chart_dirs:
        paths = charts.write(found, directory, (fmt,))
        log.info("%d %s chart(s) written to %s", len(paths), fmt.upper(), directory)
    return 0


def cmd_recommend(args: argparse.Namespace) -> int:
    minimum = parse_throughput(args.min_throughput) if args.min_throughput else 0.0
    store = _store(args)
    [section] = _sections(store, args.matrix)
    rec = recommend(section, args.speed_weight, minimum, args.workload)
    sys.stdout.write(render_recommendation(rec))
    return 0 if rec.pick else 1


def cmd_compare(args: argparse.Namespace) -> int:
    if args.by is None and len(args.refs) != 2:
        raise AnswerError("compare takes two references (A B), or --by AXIS with at most one")
    if args.by is not None and len(args.refs) > 1:
        raise AnswerError("compare --by AXIS takes at most one reference (a matrix, run or MATRIX:NAME=VALUE)")
    if args.baseline and not args.by:
        raise AnswerError("--baseline goes with --by (compare --by volblocksize --baseline 4K)")
    store = _store(args)
    drop = compare.Rule.from_thresholds(args.max_drop)
    if args.by is not None:
        rows = compare.resolve(store, args.refs[0]) if args.refs else store.results("complete")
        if not rows:
            raise AnswerError(f"{store.path} holds no complete result yet")
        comparisons = []
        for section in sections(rows):
            try:
                comparisons.append(compare.compare_by(section, args.by, args.baseline))
            except compare.CompareError as exc:
                if len({r.matrix for r in rows}) == 1:
                    raise
                log.info("%s", exc)
        if not comparisons:
            raise AnswerError(f"--by {args.by}: no matrix varies in it")
        found = [t for c in comparisons for t in compare.tables(c, drop)]
        regressed = False
    else:
        a, b = (compare.resolve(store, ref) for ref in args.refs)
        comparison = compare.compare(a, b, drop)
        found = compare.tables(comparison, drop)
        regressed = any(c.verdict == "regression" for c in comparison.changes)
        if args.format == "markdown":
            sys.stdout.write("".join(f"{tables.md_inline(line)}\n" for line in compare.describe_sides(a, b)) + "\n")
    render = tables.table_markdown if args.format == "markdown" else tables.table_csv
    sys.stdout.write("\n".join(render(t) for t in found))
    return 1 if regressed else 0


COMMANDS = {"list": cmd_list, "report": cmd_report, "recommend": cmd_recommend, "compare": cmd_compare}
ERRORS = (AnswerError, OutputError, compare.CompareError, RecommendError, SelectorError)
