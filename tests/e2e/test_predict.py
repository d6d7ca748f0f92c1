"""Issue 40 on live OpenZFS: `predict` against `zfs get used` of real copies, and a race against a
full run (guest side: tests/e2e/guest/predict.py, results/predict/).

The corpus is generated from its seed on the host too (its sha256 manifest must equal the guest's),
and `predict` runs here with the guest's OpenZFS rules, ashift 12 and a single vdev: the guest has
no lz4 or zstandard (its wheel is installed without dependencies)."""

from __future__ import annotations

import importlib.util
import json
import re
import sqlite3
from pathlib import Path

import pytest

from tests.e2e.conftest import require_phase
from zfsnas.bench.answering.recommend import recommend
from zfsnas.bench.answering.report import sections
from zfsnas.bench.predicting.predict import PredictOptions, predict
from zfsnas.bench.predicting.zfsalloc import Rules, parse_compression, parse_recordsize
from zfsnas.store.database import ReadOnlyStore

pytestmark = pytest.mark.e2e


# module scope: it must skip before the module's own module-scoped fixtures fail on missing results
@pytest.fixture(scope="module", autouse=True)
def _phase_in_this_run(config):
    require_phase(config, "predict")


_spec = importlib.util.spec_from_file_location("corpusgen", Path(__file__).parent / "guest" / "corpusgen.py")
corpusgen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpusgen)

TOLERANCE = 0.02          # the issue's: predict within 2 % of `zfs get used`
RANKING = 0.005           # and the same ranking, ratios closer than 0.5 % aside


@pytest.fixture(scope="module")
def record(results) -> dict:
    path = results / "predict" / "record.json"
    if not path.exists():
        pytest.fail(f"the guest's predict phase wrote no record (see {results / 'scenario.log'})")
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def prediction(record, tmp_path_factory):
    if "space" not in record:
        pytest.fail(f"the guest measured no space: {record.get('space_error', 'no error recorded')}")
    corpus = tmp_path_factory.mktemp("corpus")
    spec = record["space_corpus"]
    corpusgen.generate(corpus, spec["bytes"], spec["seed"])
    assert corpusgen.manifest(corpus) == spec["manifest"], "the host's corpus is not the guest's (same seed)"
    version = re.match(r"(\d+)\.(\d+)", record["zfs_version"])
    rules = Rules((int(version[1]), int(version[2])))
    measured = record["space"]
    opts = PredictOptions(str(corpus), tuple(dict.fromkeys(parse_compression(m["compression"]) for m in measured)),
                          tuple(dict.fromkeys(parse_recordsize(m["recordsize"]) for m in measured)), (12,), 1.0,
                          rules, jobs=2)
    return predict(opts), {(m["compression"], parse_recordsize(m["recordsize"])): m for m in measured}


def test_predict_is_within_2_percent_of_used(prediction, record):
    p, measured = prediction
    lines, worst = [], 0.0
    for (compression, recordsize), m in measured.items():
        e = p.estimate(parse_compression(compression).name, recordsize, 12)
        used = int(m["used"])
        off = e.predicted_bytes / used - 1
        worst = max(worst, abs(off))
        lines.append(f"{compression:>12} {recordsize >> 10:>5}K used {used:>10} predicted {e.predicted_bytes:>10} "
                     f"({off * 100:+.2f} %)")
    print("\n".join(lines))
    assert worst <= TOLERANCE, "\n".join(lines)


def test_predict_ranks_as_used_does(prediction):
    p, measured = prediction
    keys = list(measured)
    used = {k: int(measured[k]["used"]) for k in keys}
    predicted = {k: p.estimate(parse_compression(k[0]).name, k[1], 12).predicted_bytes for k in keys}
    wrong = [(a, b) for a in keys for b in keys
             if used[a] < used[b] * (1 - RANKING) and not predicted[a] < predicted[b]]
    assert not wrong, f"ordered unlike `used`: {wrong}"


def test_the_tail_and_holes_as_zfs_does(prediction):
    """compression off at 1M pays whole tail records and the sparse files' zeros; lz4 pays neither:
    what 1M costs over 128K with compression off, and what lz4 saves, are predicted as `used` shows."""
    p, measured = prediction
    used = {k: int(v["used"]) for k, v in measured.items()}
    pred = {k: p.estimate(parse_compression(k[0]).name, k[1], 12).predicted_bytes for k in measured}
    m, k = 1 << 20, 128 << 10
    tails = used[("off", m)] - used[("off", k)]
    assert tails > 0 and abs((pred[("off", m)] - pred[("off", k)]) / tails - 1) < 0.1, (tails, pred)
    saved = used[("off", m)] - used[("lz4", m)]
    assert saved > 0 and abs((pred[("off", m)] - pred[("lz4", m)]) / saved - 1) < 0.1, (saved, pred)


@pytest.fixture(scope="module")
def race(record, results) -> tuple[dict, dict]:
    if "full" not in record or "race" not in record:
        pytest.fail(f"the guest's race did not run: {record.get('race_error', 'no error recorded')}")
    return record["full"], record["race"]


def pick_of(db: Path) -> str:
    """`recommend`'s pick of the guest's database, asked here (the guest's Python starts in a minute)."""
    section = sections(ReadOnlyStore(db).results("complete", "predict-race"))[0]
    pick = recommend(section).pick
    assert pick is not None, f"no pick in {db}"
    return pick.label


def where_the_time_went(db: Path, seconds: float) -> str:
    """A run's wall time split: the process's start and housekeeping (before the matrix's first row and
    after its end), each cell's copy, its sync, and the rest of the cell (zfs create/get/destroy, the
    store); with each configuration's mean throughput."""
    con = sqlite3.connect(db)
    started, finished = con.execute("SELECT started, finished FROM matrix_runs").fetchone()
    rows = con.execute("SELECT compression, started, finished, duration_seconds, sync_seconds, bytes, "
                       "throughput_bytes_per_second FROM results WHERE status='complete'").fetchall()
    cells = sum(r[2] - r[1] for r in rows)
    copy = sum(r[3] or 0 for r in rows)
    sync = sum(r[4] or 0 for r in rows)
    rates: dict[str, list[float]] = {}
    for r in rows:
        rates.setdefault(r[0], []).append(r[6] / 1e6)
    mean_rates = ", ".join(f"{c} {sum(v) / len(v):.2f} MB/s x{len(v)}" for c, v in rates.items())
    return (f"{seconds:.0f} s: start and housekeeping {seconds - (finished - started):.0f} s, {len(rows)} cells "
            f"{cells:.0f} s (copy {copy:.0f} s of {sum(r[5] for r in rows) / 2**20:.0f} MiB, sync {sync:.0f} s, "
            f"the rest {cells - copy - sync:.0f} s), between cells {finished - started - cells:.0f} s; {mean_rates}")


def test_the_race_picks_what_the_full_run_picks_in_a_fifth_of_the_time(race, results):
    full, raced = race
    assert full["rc"] == 0 and raced["rc"] == 0, (full["stderr"][-2000:], raced["stderr"][-2000:])
    full_db, race_db = results / "predict" / "race-full.sqlite", results / "predict" / "race-race.sqlite"
    full_pick, race_pick = pick_of(full_db), pick_of(race_db)
    verdict = [line for line in raced["stdout"].splitlines() if line.startswith("race ")]
    assert verdict, raced["stdout"]
    print(f"full run {where_the_time_went(full_db, full['seconds'])}; pick {full_pick}")
    print(f"race {where_the_time_went(race_db, raced['seconds'])}; pick {race_pick}")
    print("\n".join(line for line in raced["stdout"].splitlines() if line.startswith(("race ", "pick ", "undecided "))))
    assert full_pick == race_pick
    assert raced["seconds"] <= full["seconds"] / 5, (full["seconds"], raced["seconds"], verdict)
