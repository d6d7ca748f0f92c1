"""The commands that answer from stored results: list, report, recommend, compare.

They read the database through `zfsnas.store.database.ReadOnlyStore` and write nothing to it, whoever runs them
(a user who may only read the file included). A database that cannot be read, an unknown matrix
or id, a refused output file: one line, exit status 2, nothing changed. Nothing to answer with
(an empty database, no pick, a regression found): exit status 1.

Owns the flags and output of those commands; the answers come from answering/ (report.py,
tables.py, charts.py, document.py, html.py, recommend.py and compare.py).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable

from ..store.configuration import differs_text, look_alikes
from ..store.database import ReadOnlyStore
from . import predict_command
from .answering import charts, compare, crystaldiskmark, document, html, tables
from .answering.axes import SelectorError, parse_selector
from .answering.recommend import RecommendError, parse_throughput, recommend
from .answering.recommend import render as render_recommendation
from .answering.report import Section, sections
from .options import OutputError, check_chart_dir, check_output_file, fraction, weight, write_output
from .running import racing

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


def _races(store: ReadOnlyStore) -> dict[str, list[str]]:
    """Per matrix, how each of its races (`run --until-decided`) ended, as the run kept it."""
    out: dict[str, list[str]] = {}
    for run in store.matrix_runs():
        if said := racing.stored_verdict(run.id, run.race):
            out.setdefault(run.matrix, []).extend(said)
    return out


def cmd_list(args: argparse.Namespace) -> int:
    store = _store(args)
    rows = store.results(status=None)
    if not args.all:
        rows = rows[-50:]
    configs = {r.config_id: r.configuration for r in rows}
    alikes = look_alikes(list(configs.values()))
    clients = _client_clocks(store)
    print("id\tstarted\tstatus\tmatrix\tworkload\tconfig\tcompression\trecordsize\tencryption\tsize\tpool"
          "\tMB/s\tratio\tdiffers")
    for r in rows:
        labels = configs[r.config_id].labels
        mbs = "" if r.throughput_bytes_per_second is None else f"{r.throughput_bytes_per_second / 1e6:.1f}"
        ratio = "" if r.compressratio is None else f"{r.compressratio:.2f}"
        when = clients.get(r.run_id) or time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(r.started))
        print(f"{r.id}\t{when}\t{r.status}\t{r.matrix}\t{r.workload}\t{r.config_id}"
              f"\t{labels['compression']}\t{labels['recordsize']}\t{labels['encryption']}\t{r.size}\t{r.pool}"
              f"\t{mbs}\t{ratio}\t{differs_text(alikes[r.config_id])}")
    if not rows:
        print(f"(no results in {store.path})", file=sys.stderr)
    return 0


def _client_clocks(store: ReadOnlyStore) -> dict[str, str]:
    """{run id: when} of imports whose time is the client's own clock as the file printed it (a
    CrystalDiskMark `Date:` has no time zone): shown as such, never as UTC."""
    out = {}
    for run in store.matrix_runs():
        try:
            details = json.loads(run.parameters or "{}")
        except ValueError:
            continue
        if isinstance(details, dict) and details.get("date") and str(details.get("source", "")).startswith(
                "crystaldiskmark"):
            out[run.id] = f"{details['date']} (the client's local time)"
    return out


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
    predicted = predict_command.predicted_rows(store, args.matrix)   # shown apart, labelled, never merged
    measured = args.matrix in store.matrices() if args.matrix else bool(store.matrices())
    found = _sections(store, args.matrix) if measured or not predicted else []
    races = _races(store)
    try:
        renderers: dict[str, Callable[[list[Section]], str]] = {
            "markdown": lambda s: document.markdown(s, baseline, args.cdm_format, races),
            "csv": lambda s: document.to_csv(s, baseline, args.cdm_format, races),
            "html": lambda s: html.page(s, baseline=baseline, cdm=args.cdm_format,
                                        extra=predict_command.predicted_tables(predicted),
                                        extra_findings=[predict_command.predicted_recommendation(predicted).strip()]
                                        if predicted else [], races=races)}
        text = renderers[args.format](found) if found or args.format == "html" else ""
        if args.format != "html":
            text += predict_command.predicted_report(predicted, args.format, after=bool(text))
    except SelectorError as exc:
        raise AnswerError(f"--baseline {args.baseline}: {exc}") from None
    if output is not None:
        write_output(output, text)
        log.info("report written to %s", output)
    else:
        sys.stdout.write(text)
    for directory, fmt in chart_dirs:
        paths = charts.write(found, directory, (fmt,), baseline=baseline)
        log.info("%d %s chart(s) written to %s", len(paths), fmt.upper(), directory)
    return 0


def cmd_recommend(args: argparse.Namespace) -> int:
    """The findings first (the pick closes them), then the details; exit 0 whenever it answers, a
    pick per setting included."""
    minimum = parse_throughput(args.min_throughput) if args.min_throughput else 0.0
    store = _store(args)
    predicted = predict_command.predicted_recommendation(predict_command.predicted_rows(store, args.matrix))
    if predicted and args.matrix not in store.matrices():     # predictions only: their answer, labelled
        sys.stdout.write(f"- {predicted.strip()}\n\nrecommend {args.matrix}: predictions only, nothing measured "
                         f"(`zfsnas-bench report --matrix {args.matrix}` shows every one)\n")
        return 0
    [section] = _sections(store, args.matrix)
    rec = recommend(section, args.speed_weight, minimum, args.workload)
    lines = document.finding_lines([(section, document.opening(section, rec))])
    raced = "".join(f"{line}\n" for line in _races(store).get(section.matrix, []))
    sys.stdout.write("\n".join(lines) + "\n\n" + render_recommendation(rec) + raced
                     + (f"\n{predicted}" if predicted else ""))
    return 0 if rec.answered else 1


def cmd_compare(args: argparse.Namespace) -> int:
    """The findings first (`- ` lines; CSV: `# ` lines), the sides, then the tables; exit 1 when a
    configuration regressed."""
    if args.by is None and len(args.refs) != 2:
        raise AnswerError("compare takes two references (A B), or --by AXIS with at most one")
    if args.by is not None and len(args.refs) > 1:
        raise AnswerError("compare --by AXIS takes at most one reference (a matrix, run or MATRIX:NAME=VALUE)")
    if args.baseline and not args.by:
        raise AnswerError("--baseline goes with --by (compare --by volblocksize --baseline 4K)")
    store = _store(args)
    drop = compare.Rule.from_thresholds(args.max_drop)
    if args.by is not None:
        comparisons, opening = _compare_by(store, args)
        sides: list[str] = []
    else:
        (a, a_kind), (b, b_kind) = (_resolve_either(store, ref) for ref in args.refs)
        if a_kind != b_kind:
            raise AnswerError(f"{args.refs[0] if a_kind == 'predicted' else args.refs[1]} names predictions: "
                              "compare predictions with predictions (report shows both kinds, apart)")
        comparisons = [compare.compare(a, b, drop)]
        opening = compare.finding_lines(comparisons[0], a, b)
        sides = compare.describe_sides(a, b)
        if a_kind == "predicted":     # said on every line a reader may quote alone
            opening = [f"PREDICTED (not measured): {line}" for line in opening]
            sides = [f"{line} (PREDICTED by zfsnas-bench predict, not measured)" for line in sides]
    regressed = any(c.verdict == "regression" for comparison in comparisons for c in comparison.changes)
    if args.format == "markdown":
        sys.stdout.write("".join(f"- {tables.md_inline(line)}\n" for line in opening) + "\n"
                         + "".join(f"{tables.md_inline(line)}\n" for line in sides) + ("\n" if sides else ""))
        sys.stdout.write("\n".join(tables.table_markdown(t) for c in comparisons for t in compare.tables(c, drop)))
    else:
        sys.stdout.write("".join(f"# {line}\n" for line in opening))
        with tables.precise():
            found = [t for c in comparisons for t in compare.tables(c, drop)]
        sys.stdout.write("\n".join(tables.table_csv(t) for t in found))
    return 1 if regressed else 0


def _compare_by(store: ReadOnlyStore, args: argparse.Namespace) -> tuple[list[compare.Comparison], list[str]]:
    """`compare --by AXIS [REF]`: a comparison per matrix that varies in AXIS, and their findings
    (each line after its matrix when there are several)."""
    rows = compare.resolve(store, args.refs[0]) if args.refs else store.results("complete")
    if not rows:
        raise AnswerError(f"{store.path} holds no complete result yet")
    several = len({r.matrix for r in rows}) > 1
    comparisons, opening = [], []
    for section in sections(rows):
        try:
            comparison = compare.compare_by(section, args.by, args.baseline)
        except compare.CompareError as exc:
            if not several:
                raise
            log.info("%s", exc)
            continue
        comparisons.append(comparison)
        lines = compare.finding_lines(comparison, [], [], section)
        opening += [f"{section.matrix}: {x}" for x in lines] if several else lines
    if not comparisons:
        raise AnswerError(f"--by {args.by}: no matrix varies in it")
    return comparisons, opening


def _resolve_either(store: ReadOnlyStore, ref: str) -> tuple[list, str]:
    """The measured results `ref` names, else the predicted ones (with which kind it was)."""
    try:
        return compare.resolve(store, ref), "complete"
    except compare.CompareError:
        if rows := compare.resolve_rows(predict_command.predicted_rows(store), ref):
            return rows, "predicted"
        raise


COMMANDS = {"list": cmd_list, "report": cmd_report, "recommend": cmd_recommend, "compare": cmd_compare}
ERRORS = (AnswerError, OutputError, compare.CompareError, RecommendError, SelectorError)
