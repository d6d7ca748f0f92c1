"""`zfsnas-bench predict`: its flags and output, its predictions stored as results of the `predicted`
kind, and how report, recommend and compare show stored predictions: in sections of their own,
labelled predicted, never merged with measured results.

A prediction is stored like an import: one matrix run, one result row per combination, in one
transaction, with status `predicted`. Every reader of measured results asks for `complete` ones
(report's sections, recommend, compare, the exporter's `bench` collector, the regression alert), so
a prediction can never be taken for a measurement; `list` shows it with its status. The estimate
is predicting/predict.py's; the model predicting/zfsalloc.py's.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import socket
import sys
import time
from collections.abc import Sequence

from ..store.configuration import Configuration, pairs
from ..store.database import ReadOnlyStore, Store
from ..store.schema import ResultFigures, ResultRow
from .answering.tables import Table, size_unit, table_csv, table_markdown
from .options import positive_int
from .predicting.predict import (
    Prediction,
    PredictOptions,
    human_bytes,
    lz4_note,
    parse_sample,
    predict,
    render_csv,
    render_text,
    split,
)
from .predicting.zfsalloc import ModelError, parse_compression, parse_recordsize, parse_rules, parse_vdev, size_name
from .running.runner import new_run_id

log = logging.getLogger("zfsnas.bench")

PREDICTED = "predicted"          # the status of a stored prediction: what no reader of measurements selects
WORKLOAD = "predict"
DEFAULT_COMPRESSIONS = "off,lz4,zstd-fast-1,zstd-1,zstd-3"
DEFAULT_RECORDSIZES = "128K,1M"


class PredictError(Exception):
    """A request predict cannot take; one line, exit status 2."""


def add_command(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("predict", parents=[common],
                       help="predict the on-disk size of a corpus per compression/recordsize, writing nothing to a pool")
    p.add_argument("--corpus", required=True, help="the directory of files to predict for")
    p.add_argument("--compression", default=DEFAULT_COMPRESSIONS,
                   help=f"comma-separated: off, lz4, zle, gzip-N, zstd-N, zstd-fast-N (default {DEFAULT_COMPRESSIONS})")
    p.add_argument("--recordsize", default=DEFAULT_RECORDSIZES,
                   help=f"comma-separated powers of two (default {DEFAULT_RECORDSIZES})")
    p.add_argument("--ashift", default="12", help="comma-separated sector shifts (default 12: 4 KiB sectors)")
    p.add_argument("--sample", default="2%", help="share of the corpus read, e.g. 2%% (default), 100%% for all")
    p.add_argument("--vdev", default="disk", help="disk or mirror (the default's charge), or raidzP:WIDTH (raidz2:8)")
    p.add_argument("--openzfs", default="2.3", help="whose compression rules: 2.3 and later (default) or 2.1, 2.2")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (the same seed, the same sample)")
    p.add_argument("--jobs", type=positive_int, default=os.cpu_count() or 1,
                   help="processes that compress (default: one per CPU)")
    p.add_argument("--format", choices=("text", "csv"), default="text")
    p.add_argument("--matrix", default="predict", help="the matrix the stored predictions belong to (default predict)")
    p.add_argument("--no-store", dest="store", action="store_false", help="print only; store nothing in --db")


def options(args: argparse.Namespace) -> PredictOptions:
    if not os.path.isdir(args.corpus):
        raise PredictError(f"corpus {args.corpus} is not a directory")
    try:
        compressions = tuple(dict.fromkeys(parse_compression(c) for c in split(args.compression)))
        recordsizes = tuple(dict.fromkeys(parse_recordsize(r) for r in split(args.recordsize)))
        ashifts = tuple(dict.fromkeys(_ashift(a) for a in split(args.ashift)))
        fraction = parse_sample(args.sample)
        rules, vdev = parse_rules(args.openzfs), parse_vdev(args.vdev)
    except ValueError as exc:
        raise PredictError(str(exc)) from None
    if not compressions or not recordsizes or not ashifts:
        raise PredictError("--compression, --recordsize and --ashift each need a value")
    return PredictOptions(os.path.abspath(args.corpus), compressions, recordsizes, ashifts, fraction, rules, vdev,
                          args.seed, args.jobs)


def _ashift(text: str) -> int:
    if not text.isdigit() or not 9 <= int(text) <= 16:
        raise ModelError(f"ashift {text!r}: 9 to 16 (12 for 4 KiB sectors)")
    return int(text)


def cmd_predict(args: argparse.Namespace) -> int:
    opts = options(args)
    store = Store(args.db) if args.store else None      # a database that cannot be written fails before the work
    started = time.time()
    prediction = predict(opts)
    sys.stdout.write(render_csv(prediction) if args.format == "csv" else render_text(prediction))
    if args.format == "csv" and (note := lz4_note(prediction)):
        log.warning("%s", note)          # the CSV stays CSV; the text output has it as a note
    if store is not None:
        run_id = store_prediction(store, prediction, args.matrix, started)
        log.info("predictions stored as run %s of matrix %s in %s (status %s; zfsnas-bench report --matrix %s)",
                 run_id, args.matrix, args.db, PREDICTED, args.matrix)
    return 0


def configuration(p: Prediction, matrix: str, compression: str, recordsize: int, ashift: int) -> Configuration:
    o = p.opts
    share = "100%" if o.fraction >= 1 else f"{o.fraction * 100:g}%"
    data = {"source": WORKLOAD, "corpus": o.corpus, "corpus_files": p.files, "corpus_bytes": p.logical_bytes,
            "sample": share, "seed": o.seed}
    return Configuration(matrix=matrix, workload=WORKLOAD, size="all", data=pairs(data),
                         properties=pairs({"compression": compression, "recordsize": size_name(recordsize)}),
                         pool="-", layout=pairs({"ashift": ashift, "vdevs": o.vdev.name}), parameters=(),
                         zfs_version=f"OpenZFS {o.rules.name} rules", direct="-", host=socket.gethostname())


def store_prediction(store: Store, p: Prediction, matrix: str, started: float) -> str:
    """Every estimate of `p` as one `predicted` result, in one transaction; the run id."""
    rows = []
    for e in p.estimates:
        config = configuration(p, matrix, e.compression, e.recordsize, e.ashift)
        details = {"error_bytes": e.error_bytes, "error_percent": round(e.error_percent, 4),
                   "data_bytes": e.data_bytes, "metadata_bytes": e.metadata_bytes, "ratio": round(e.ratio, 6),
                   "cpu_seconds_per_gib": e.cpu_seconds_per_gib, "sampled_bytes": e.sampled_bytes,
                   "confidence": 0.95, "lz4": "openzfs" if p.lz4.exact else "package", "lz4_library": p.lz4.library}
        if p.lz4.fallback:
            details["lz4_fallback"] = p.lz4.fallback
        rows.append((config, ResultFigures(bytes=e.logical_bytes, used_bytes=e.predicted_bytes,
                                           logicalused_bytes=e.logical_bytes, compressratio=round(e.compressratio, 4),
                                           duration_seconds=p.seconds, details=details)))
    run_id = new_run_id()
    store.import_results(run_id, matrix, p.opts.corpus, rows, started, time.time(),
                         {"kind": PREDICTED, "corpus": p.opts.corpus}, status=PREDICTED)
    return run_id


# --- stored predictions, as the answer commands show them ---------------------------------------

def predicted_rows(store: Store | ReadOnlyStore, matrix: str | None = None) -> list[ResultRow]:
    return store.results(PREDICTED, matrix)


def _latest(rows: Sequence[ResultRow]) -> list[ResultRow]:
    """The newest prediction of each configuration, in the order they were stored."""
    newest: dict[str, ResultRow] = {}
    for row in rows:
        newest[row.config_id] = row
    return sorted(newest.values(), key=lambda r: (r.started, r.id))


def _label(row: ResultRow) -> str:
    c = row.configuration
    return f"{c.dataset_property('compression')} / {c.recordsize}"


def predicted_tables(rows: Sequence[ResultRow]) -> list[Table]:
    """One table per matrix of predictions: predicted on-disk size, ratio and sampling error."""
    tables = []
    by_matrix: dict[str, list[ResultRow]] = {}
    for row in _latest(rows):
        by_matrix.setdefault(row.matrix, []).append(row)
    for matrix, group in by_matrix.items():
        unit_name, unit = size_unit(r.used_bytes for r in group)
        body = []
        for r in group:
            c = r.configuration
            d = _details(r)
            body.append([c.dataset_property("compression"), c.recordsize, dict(c.layout).get("ashift", "-"),
                         f"{(r.used_bytes or 0) / unit:.1f}", f"{d.get('ratio', 0):.2f}x",
                         "exact" if not d.get("error_bytes") else f"±{d.get('error_percent', 0):.2f} %",
                         dict(c.data).get("sample", "-"), r.config_id])
        corpus = dict(group[0].configuration.data).get("corpus", "-")
        note = ("Predicted by `zfsnas-bench predict` from a sample of the corpus, nothing written: never mixed with "
                "measured results.")
        if libraries := {_details(r).get("lz4_library", "") for r in group
                         if _details(r).get("lz4") == "package" and r.configuration.dataset_property("compression") == "lz4"}:
            note += (f" lz4 was sized with the {', '.join(sorted(libraries))}, not OpenZFS's own LZ4: about 1.5-3 % "
                     "high.")
        tables.append(Table(f"{matrix}: PREDICTED on-disk size of {corpus} (not measured)",
                            ["compression", "recordsize", "ashift", f"predicted on-disk {unit_name}", "ratio",
                             "± (95 %)", "sample", "config"], body, note=note))
    return tables


def _details(row: ResultRow) -> dict:
    import json

    try:
        details = json.loads(row.details or "{}")
    except ValueError:
        return {}
    return details if isinstance(details, dict) else {}


def predicted_report(rows: Sequence[ResultRow], fmt: str, after: bool = True) -> str:
    """The predictions as Markdown or CSV ("" without predictions): their answer first (a `- ` line,
    in CSV a `# ` line), labelled predicted, then their tables; `after`: other output precedes it."""
    tables = predicted_tables(rows)
    if not tables:
        return ""
    opening = predicted_recommendation(rows).strip()
    if fmt == "csv":
        return f"# {opening}\n" + "".join(table_csv(t) for t in tables)
    return ("\n" if after else "") + f"- {opening}\n\n" + "\n".join(table_markdown(t) for t in tables)


def predicted_recommendation(rows: Sequence[ResultRow]) -> str:
    """`recommend` on predictions: the smallest predicted on-disk size, said to be predicted, and how
    sure that is: the runner-up (the next smallest on the same vdevs and ashift) and whether the gap
    exceeds the two sampling errors (taken as independent, which overstates the error of a gap
    between two estimates from one sample: a conservative verdict)."""
    latest = [r for r in _latest(rows) if r.used_bytes]
    if not latest:
        return ""
    best = min(latest, key=lambda r: (r.used_bytes, r.id))
    c = best.configuration
    d = _details(best)
    first = latest[0]
    text = (f"Predicted (not measured): {_label(best)} at ashift {dict(c.layout).get('ashift', '-')} is the smallest "
            f"on disk, {human_bytes(best.used_bytes or 0)} ({d.get('ratio', 0):.2f}x)")
    if first is not best and first.used_bytes:
        text += f", {(1 - (best.used_bytes or 0) / first.used_bytes) * 100:.1f} % less than {_label(first)}"
    error = d.get("error_percent") or 0.0
    text += f"; sampling error ±{error:.2f} % (95 %)" if error else "; the whole corpus was read"
    rivals = [r for r in latest if r is not best and r.configuration.layout == c.layout]
    if rivals:
        second = min(rivals, key=lambda r: (r.used_bytes, r.id))
        gap = ((second.used_bytes or 0) / (best.used_bytes or 1) - 1) * 100
        theirs = _details(second).get("error_percent") or 0.0
        combined = math.hypot(error, theirs)
        beyond = gap > combined
        text += (f"; {'decided' if beyond else 'not decided'}: the runner-up {_label(second)} is {gap:.2f} % larger, "
                 + (f"{'beyond' if beyond else 'within'} the sampling errors (±{theirs:.2f} % its own)" if combined
                    else "both exact"))
    return text + ". Throughput is not predicted: measure it with `zfsnas-bench run`.\n"


COMMANDS = {"predict": cmd_predict}
ERRORS = (PredictError, ModelError)
