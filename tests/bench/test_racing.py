"""Racing (`run --until-decided`): the decision logic on simulated cells (seeded noise: the race
picks what a full run with three repeats picks, and stops early), the sustained rate of a copy,
fio's steady state in the plan, and a real race with real fio against the fake zfs."""

import json
import math
import random
import shutil
import sqlite3
import statistics
from dataclasses import replace

import pytest

from zfsnas.bench.cli import main
from zfsnas.bench.running.copy import SustainedRate, copy_sampled
from zfsnas.bench.running.matrix import Cell
from zfsnas.bench.running.planner import CellPlan, PlanOptions, in_kept_child, plan_cell
from zfsnas.bench.running.racing import Race, RaceSettings, parse_duration
from zfsnas.bench.statistics.intervals import mean, objective, pick_confidence, race_state, t_quantile
from zfsnas.bench.statistics.sampling import stratified_windows
from zfsnas.store.configuration import Configuration, pairs
from zfsnas.store.schema import ResultFigures

from .conftest import JOBS
from .seeds import seeded_store


def config(i: int) -> Configuration:
    return Configuration(matrix="sim", workload="copy", size="all", data=(),
                         properties=pairs({"compression": f"c{i}", "recordsize": "1M"}), pool="tank", layout=(),
                         parameters=(), zfs_version="x", direct="1", host="h")


def cell(i: int) -> Cell:
    return Cell(workload="copy", compression=f"c{i}", recordsize="1M", encryption="off", size="all", repeat=1)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def simulate(mu: list[float], space: list[float], sigma: float, rng: random.Random,
             settings: RaceSettings | None = None) -> tuple[Race, int]:
    """A race over cells whose throughput is mu x lognormal noise; each cell takes one clock second."""
    settings = settings or RaceSettings()
    clock = Clock()
    race = Race(settings, lambda index, c: CellPlan(index, c, f"c{index}", "tank", 1, "t", (), ()), clock)
    plans = [race.replan(i + 1, cell(i)) for i in range(len(mu))]
    runs = 0
    while plans:
        for plan in plans:
            if not race.allows(plan, config(int(plan.cell.compression[1:])).id):
                race.stop("budget")
                plans = []
                break
            i = int(plan.cell.compression[1:])
            tp = mu[i] * math.exp(rng.gauss(0, sigma))
            race.record(plan, config(i), "complete",
                        ResultFigures(throughput_bytes_per_second=tp, used_bytes=int(space[i] * 1e9),
                                      logicalused_bytes=10**9), 1.0)
            clock.now += 1
            runs += 1
        plans = race.next_cells(runs + 1) if plans else []
    return race, runs


def leader(race: Race) -> str:
    [group] = race.groups.values()
    samples = race.samples(group)
    return group[race_state(samples, race.settings.confidence).leader].config.dataset_property("compression")


def full_run_pick(mu, space, sigma, rng, w=0.5) -> str:
    """What `recommend` picks after a full run with three repeats: the best score of the medians."""
    medians = [statistics.median(m * math.exp(rng.gauss(0, sigma)) for _ in range(3)) for m in mu]
    return f"c{max(range(len(mu)), key=lambda i: objective(medians[i], space[i], w))}"


def test_the_race_picks_what_a_full_run_picks_and_stops_early():
    """FITS-shaped: eight configurations whose scores lie 3-40 % apart, 3 % noise per run."""
    agree = decided_right = decided = 0
    runs = []
    for seed in range(200):
        rng = random.Random(seed)
        mu = [rng.uniform(80e6, 200e6) for _ in range(8)]
        space = [rng.uniform(0.6, 0.9) for _ in range(8)]
        scores = sorted(objective(m, s, 0.5) for m, s in zip(mu, space))
        if scores[-1] - scores[-2] < 0.03 * 0.5:           # a near tie: no run decides it, full or raced
            continue
        race, n = simulate(mu, space, 0.03, rng)
        runs.append(n)
        best = f"c{max(range(8), key=lambda i: objective(mu[i], space[i], 0.5))}"
        agree += leader(race) == full_run_pick(mu, space, 0.03, rng)
        if race.outcome == "decided":
            decided += 1
            decided_right += leader(race) == best
    total = len(runs)
    assert total > 100
    assert agree >= 0.9 * total, (agree, total)
    assert decided >= 0.8 * total and decided_right >= 0.97 * decided, (decided, decided_right)
    assert statistics.mean(runs) <= 0.7 * 3 * 8, statistics.mean(runs)     # well under the full run's 24


def test_a_tie_is_never_called_decided_and_the_cap_stops_it():
    race, runs = simulate([100e6, 100e6, 60e6], [0.7, 0.7, 0.7], 0.05, random.Random(3),
                          RaceSettings(max_repeats=6))
    assert race.outcome in ("repeats", "decided") and runs <= 3 * 6
    lines = race.verdict()
    assert lines[0].startswith("race ")
    if race.outcome == "repeats":
        assert "undecided between" in lines[1] and "c2" not in lines[1].split(";")[0]


def test_the_budget_stops_the_race_and_says_so():
    race, runs = simulate([100e6, 99e6, 98e6, 97e6], [0.7] * 4, 0.05, random.Random(1), RaceSettings(budget=9.5))
    assert race.outcome == "budget" and runs == 9
    assert race.verdict()[0].startswith("race budget of 0m10s spent after 9 run(s)")


def test_confidence_sentence():
    samples = {"lz4": [math.log(100), math.log(102), math.log(98)], "zstd-1": [math.log(80), math.log(81), math.log(79)]}
    text = pick_confidence("lz4", "zstd-1", samples)
    assert "lz4 is +25.0 % on throughput over the runner-up zstd-1" in text and text.endswith("decided")
    assert "3 and 3 run(s)" in text and "4 degree(s) of freedom" in text
    squares = sum((v - mean(vs)) ** 2 for vs in samples.values() for v in vs)
    sd = math.sqrt(squares / 4)                                     # pooled over both, 2 + 2 degrees of freedom
    half = t_quantile(0.975, 4) * sd * math.sqrt(2 / 3)
    diff = mean(samples["lz4"]) - mean(samples["zstd-1"])
    assert f"{(math.exp(diff - half) - 1) * 100:+.1f} %" in text
    once = pick_confidence("lz4", "zstd-1", {"lz4": [1.0], "zstd-1": [0.5]})
    assert "noise is unknown" in once


def test_t_quantiles():
    assert t_quantile(0.975, 1) == pytest.approx(12.7062, abs=1e-3)
    assert t_quantile(0.975, 10) == pytest.approx(2.2281, abs=1e-3)
    assert t_quantile(0.995, 3) == pytest.approx(5.8409, abs=1e-3)
    assert t_quantile(0.975, math.inf) == pytest.approx(1.95996, abs=1e-4)


def test_sustained_rate_after_the_buffer():
    """A copy that writes 1 GB/s into a 64 MB buffer, then the pool's 100 MB/s with a txg sawtooth."""
    meter = SustainedRate(64 << 20, min_seconds=3.0)
    t, copied = 0.0, 0
    while not meter.observe(copied, t):
        full = copied >= 64 << 20
        rate = (100e6 * (1.3 if int(t * 2) % 2 else 0.7)) if full else 1e9
        t += 0.05
        copied += int(rate * 0.05)
        assert t < 60
    assert meter.rate == pytest.approx(100e6, rel=0.05)
    assert copied < 64 * 2**20 + 100e6 * 6


def test_a_racing_copy_copies_a_stratified_prefix(tmp_path):
    corpus = tmp_path / "corpus"
    for kind in ("a", "b"):
        (corpus / kind).mkdir(parents=True)
        for i in range(30):
            (corpus / kind / f"{i}.{kind}").write_bytes(bytes([i]) * 100_000)
    result = copy_sampled(corpus, tmp_path / "dest", limit=1_000_000)
    copied = list((tmp_path / "dest").rglob("*.*"))
    assert result.files == len(copied) == 10 and result.bytes == 1_000_000
    assert abs(sum(p.suffix == ".a" for p in copied) - 5) <= 1
    for p in copied:
        assert p.read_bytes() == (corpus / p.relative_to(tmp_path / "dest")).read_bytes()


@pytest.mark.parametrize("seed", range(6))
def test_every_prefix_of_a_racing_copy_holds_each_kind_s_share_of_the_bytes(tmp_path, seed):
    """Seeded corpora of a few large files and many small ones (as a FITS archive with a few disk images):
    every prefix of the racing copy's windows holds each type's share of the bytes (a whole-file order
    gave one large file's key the say), each window is written at its own offset of its file, and
    copied to the end every file is whole (holes, tails and empty files included)."""
    rng = random.Random(seed)
    corpus = tmp_path / "corpus"
    shares: dict[str, int] = {}
    for kind, count, largest in (("img", rng.randint(1, 3), 3 << 20), ("fits", rng.randint(3, 8), 1 << 20),
                                 ("txt", rng.randint(20, 60), 40 << 10), ("cfg", rng.randint(5, 30), 600)):
        (corpus / kind).mkdir(parents=True)
        for i in range(count):
            size = rng.randint(0 if kind == "cfg" else largest // 3, largest)
            (corpus / kind / f"{i}.{kind}").write_bytes(rng.randbytes(size))
            shares[kind] = shares.get(kind, 0) + size
    total = sum(shares.values())
    window = 64 << 10
    order = stratified_windows(corpus, seed, window)
    assert sum(p.length for p in order) == total
    assert all(p.offset % window == 0 and 0 <= p.length <= window for p in order)
    for cut in (0.15, 0.3, 0.5):
        prefix, got = 0, {}
        for p in order:
            if prefix >= cut * total:
                break
            kind = p.file.relative.split("/")[0]
            got[kind] = got.get(kind, 0) + p.length
            prefix += p.length
        for kind, size in shares.items():
            # each type within a few windows of its share (whole files: off by a whole 3 MiB image)
            assert abs(got.get(kind, 0) - size / total * prefix) <= 3 * window + 0.1 * size, (cut, kind, got, shares)
    part = copy_sampled(corpus, tmp_path / "part", limit=total // 3, window=window)
    assert total // 3 <= part.bytes < total // 3 + window
    for path in (tmp_path / "part").rglob("*.*"):
        source = (corpus / path.relative_to(tmp_path / "part")).read_bytes()
        written = path.read_bytes()
        for at in range(0, len(written), window):      # a window is the source's bytes, or not written (zeros)
            chunk = written[at:at + window]
            assert chunk == source[at:at + len(chunk)] or chunk == bytes(len(chunk))
    whole = copy_sampled(corpus, tmp_path / "whole", window=window)
    assert whole.bytes == total
    for path in corpus.rglob("*.*"):
        assert (tmp_path / "whole" / path.relative_to(corpus)).read_bytes() == path.read_bytes()


def test_fio_steady_state_only_where_the_job_allows(tmp_path):
    opts = PlanOptions("tank/scratch", "r1", JOBS, tmp_path, racing=True, dirty_data_max=1 << 30)
    timed = plan_cell(1, Cell("seq-write", "lz4", "1M", "off", "1G", 1, runtime=60), opts)
    fio = next(s for s in timed.steps if s.kind == "fio").argv
    assert "--steadystate=bw_slope:1%" in fio and "--steadystate_duration=15s" in fio
    assert "--steadystate_ramp_time=6s" in fio
    sized = plan_cell(2, Cell("write-size", "lz4", "1M", "off", "4x dirty", 1), opts)
    assert not any(a.startswith("--steadystate") for s in sized.steps for a in s.argv)
    full = plan_cell(3, Cell("seq-write", "lz4", "1M", "off", "1G", 1, runtime=60),
                     PlanOptions("tank/scratch", "r1", JOBS, tmp_path))
    assert not any(a.startswith("--steadystate") for s in full.steps for a in s.argv)
    copy = plan_cell(4, Cell("copy", "lz4", "1M", "off", "all", 1, corpus=str(tmp_path)), opts)
    assert next(s for s in copy.steps if s.kind == "copy").argv[-3:] == ("--stratified", f"--window={1 << 20}",
                                                                       f"--until-sustained={1 << 30}")
    big = plan_cell(5, Cell("copy", "lz4", "4M", "off", "all", 1, corpus=str(tmp_path)), opts)
    assert f"--window={4 << 20}" in next(s for s in big.steps if s.kind == "copy").argv     # whole records
    # the child's space read before the copy (a racing cell's space is what its copy adds), and its mark
    assert [s.kind for s in copy.steps] == ["create", "baseline", "copy", "sync", "space", "destroy"]
    assert copy.steps[1].argv[-2:] == ("type,origin,org.zfsnas:bench-run,used,logicalused", copy.child)
    repeat = in_kept_child(plan_cell(9, replace(copy.cell, repeat=2), opts), copy)
    assert [s.kind for s in repeat.steps] == ["baseline", "copy", "sync", "space", "destroy"]
    assert repeat.child == copy.child and repeat.target == copy.target + "-r2"
    assert all(s.argv[-1] == copy.child for s in repeat.steps if s.kind in ("baseline", "space", "destroy"))
    assert next(s for s in repeat.steps if s.kind == "copy").argv[2] == repeat.target
    with pytest.raises(ValueError):
        in_kept_child(timed, copy)


def test_durations():
    assert parse_duration("30m") == 1800 and parse_duration("1h30m") == 5400 and parse_duration("90") == 90
    for bad in ("soon", "0", "-5m", ""):
        with pytest.raises(ValueError):
            parse_duration(bad)


# --- a real race: real fio, the fake zfs -------------------------------------------------------------

RACE = """name = "race"
workloads = ["seq-write"]
compression = ["off", "lz4"]
size = ["8M"]
runtime = 5
repeats = 3
"""


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed (./dev test installs it)")
def test_a_real_race_with_fio(fake_zfs, tmp_path, capsys):
    matrix = tmp_path / "race.toml"
    matrix.write_text(RACE)
    db = tmp_path / "bench.sqlite"
    rc = main(["run", str(matrix), "--dataset", "tank/scratch", *fake_zfs.flags(db), "--mountpoint",
               str(fake_zfs.root / "tank/scratch"), "--no-direct", "--until-decided", "--max-repeats", "3",
               "--budget", "5m"])
    assert rc == 0
    out = capsys.readouterr().out.splitlines()
    verdict = [line for line in out if line.startswith("race ")]
    assert len(verdict) == 1 and ("decided" in verdict[0] or "3 repeats reached" in verdict[0])
    con = sqlite3.connect(db)
    rows = con.execute("SELECT compression, repeat, status, fio_json, details, duration_seconds FROM results "
                       "ORDER BY id").fetchall()
    assert [(r[0], r[1]) for r in rows[:2]] == [("off", 1), ("lz4", 1)]       # each configuration once first
    assert all(r[2] == "complete" for r in rows) and 2 <= len(rows) <= 6
    for r in rows:
        job = json.loads(r[3])["jobs"][0]
        assert job["steadystate"]["ss"].startswith("bw_slope")
        assert "steady_state" in json.loads(r[4])
    repeats = {}
    for r in rows:
        repeats[r[0]] = repeats.get(r[0], 0) + 1
        assert r[1] == repeats[r[0]]                                          # repeats numbered per configuration
    # a full run would take 3 x 2 runs of the whole runtime; the race never more
    assert len(rows) <= 6
    # the verdict, kept with the run, as printed; report states it later
    run_id, stored = con.execute("SELECT id, race FROM matrix_runs").fetchone()
    record = json.loads(stored)
    assert record["verdict"][0] == verdict[0] and all(line in out for line in record["verdict"])
    assert record["runs"] == len(rows) and record["outcome"] in ("decided", "repeats")
    assert main(["report", "--db", str(db)]) == 0
    assert f"raced (`run --until-decided`, run {run_id}): {verdict[0][len('race '):]}" in capsys.readouterr().out


def test_the_race_verdict_is_kept_with_the_run_and_the_answers_state_it(tmp_path, capsys):
    """How a race ended (budget spent, or decided) is stored with its run; report (Markdown, CSV,
    HTML) and recommend say it later, as `run` printed it; a record nobody can read says nothing."""
    race, runs = simulate([100e6, 99e6, 98e6, 97e6], [0.7] * 4, 0.05, random.Random(1), RaceSettings(budget=9.5))
    record = race.to_record()
    assert (record["outcome"], record["runs"], record["budget_seconds"], record["confidence"]) == ("budget", runs, 9.5,
                                                                                                  0.95)
    assert record["verdict"] == race.verdict() and record["verdict"][0].startswith("race budget of 0m10s spent")
    [entry] = record["races"]
    assert sum(entry["runs"].values()) == runs and not entry["decided"] and entry["leader"] in entry["contenders"]
    db = tmp_path / "bench.sqlite"
    store = seeded_store(db, ("lab",))
    store.record_race("lab-seq-2", record)
    store.db.execute("UPDATE matrix_runs SET race='{not json' WHERE id='lab-seq-3'")
    store.close()
    said = [f"raced (`run --until-decided`, run lab-seq-2): {record['verdict'][0][len('race '):]}",
            *record["verdict"][1:]]
    assert main(["report", "--db", str(db), "--matrix", "fio-seq"]) == 0
    lines = capsys.readouterr().out.splitlines()
    title = next(i for i, line in enumerate(lines) if line.startswith("## "))
    assert lines[title + 2:title + 2 + len(said)] == said and lines[title + 2 + len(said)] == ""
    assert main(["report", "--db", str(db), "--matrix", "fio-seq", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    findings = [i for i, line in enumerate(lines) if line.startswith("# ")]
    assert [lines[i] for i in findings[-len(said):]] == [f"# fio-seq: {line}" for line in said]
    assert main(["recommend", "fio-seq", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "\n".join(said) in out and "not json" not in out
    html = tmp_path / "r.html"
    assert main(["report", "--db", str(db), "--matrix", "fio-seq", "--format", "html", "-o", str(html)]) == 0
    assert said[0] in html.read_text()


# --- a race of copies: each configuration's child kept for its repeats ----------------------------------

COPY_RACE = """name = "copy-race"
workload = "copy"
compression = ["off", "lz4"]
recordsize = ["1M"]
size = ["all"]
repeats = 3
"""


def copy_race(fake_zfs, tmp_path, room_for_one: bool = False, capacity: float | None = None) -> tuple[list[dict], int]:
    """A race of two copy configurations (compression changes nothing on a temporary directory, so
    nothing is decided: the repeat cap ends it) on a corpus of mixed files; its rows and corpus size."""
    corpus = tmp_path / "corpus"
    rng = random.Random(40)
    for kind in ("txt", "fits", "bin"):
        (corpus / kind).mkdir(parents=True)
        for i in range(6):
            (corpus / kind / f"{i}.{kind}").write_bytes(rng.randbytes(rng.randrange(1, 200_000)))
    total = sum(p.stat().st_size for p in corpus.rglob("*.*"))
    if room_for_one:     # the run starts (room for one copy), no child is kept beside another copy
        state = fake_zfs.read()
        state["available"] = total + total // 10 + 4096
        fake_zfs.write(state)
    if capacity is not None:     # a pool of `capacity` corpora that fills as the copies land
        state = fake_zfs.read()
        state["capacity"] = int(capacity * sum(p.stat().st_blocks * 512 for p in corpus.rglob("*.*")))
        fake_zfs.write(state)
    matrix = tmp_path / "copy-race.toml"
    matrix.write_text(COPY_RACE + f'corpus = "{corpus}"\n')
    db = tmp_path / "bench.sqlite"
    rc = main(["run", str(matrix), "--dataset", "tank/scratch", *fake_zfs.flags(db), "--mountpoint",
               str(fake_zfs.root / "tank/scratch"), "--dirty-data-max", str(64 << 10),
               "--until-decided", "--max-repeats", "3"])
    assert rc == 0
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    return [dict(r) for r in con.execute("SELECT * FROM results ORDER BY id")], total


def test_a_racing_copy_repeats_in_the_child_its_configuration_kept(fake_zfs, tmp_path):
    """Repeats copy into the child their configuration's first cell made (no create, no destroy per
    repeat: the children go when the run ends); every cell's space is what its own copy added."""
    rows, total = copy_race(fake_zfs, tmp_path)
    assert len(rows) == 6 and all(r["status"] == "complete" for r in rows)
    first = {}
    for r in rows:
        first.setdefault(r["compression"], r["dataset"])
        assert r["dataset"] == first[r["compression"]]               # the first cell's child, kept
        assert r["bytes"] == total and r["logicalused_bytes"] == total  # the copy's own bytes, not the child's
        assert 0 < r["used_bytes"] and "what this copy added" in json.loads(r["details"])["space"]
    assert len(set(first.values())) == 2
    commands = [c for c in fake_zfs.commands() if c[:2] in (["zfs", "create"], ["zfs", "destroy"], ["zpool", "sync"])]
    kinds = [c[1] for c in commands]
    assert kinds == ["create", "sync", "create", "sync", *["sync"] * 4, "destroy", "destroy"]
    assert {c[-1] for c in commands if c[1] == "destroy"} == set(first.values())
    assert set(fake_zfs.datasets()) == {"tank", "tank/scratch", "tank/scratchX", "tank/home"}   # nothing left


def test_a_racing_copy_without_room_for_another_copy_keeps_no_child(fake_zfs, tmp_path):
    """Where the scratch dataset could not hold the corpus once more beside a kept child, every cell
    makes and destroys its own, as a full run does."""
    rows, total = copy_race(fake_zfs, tmp_path, room_for_one=True)
    assert len(rows) == 6 and len({r["dataset"] for r in rows}) == 6
    assert all(r["logicalused_bytes"] == total for r in rows)
    kinds = [c[1] for c in fake_zfs.commands() if c[:2] in (["zfs", "create"], ["zfs", "destroy"])]
    assert kinds == ["create", "destroy"] * 6


def test_a_kept_child_that_fills_the_pool_goes_and_the_next_repeat_makes_its_own(fake_zfs, tmp_path):
    """On a pool with room for three and a half corpora: both first copies are kept, the first repeat
    that leaves too little room beside its child takes that child with it (seen live: the next repeat
    then failed on a child that no longer existed), and later repeats make their own; nothing fails,
    nothing is left."""
    rows, total = copy_race(fake_zfs, tmp_path, capacity=3.5)
    assert len(rows) == 6 and all(r["status"] == "complete" for r in rows), [r["error"] for r in rows]
    assert all(r["logicalused_bytes"] == total for r in rows)
    creates = [c for c in fake_zfs.commands() if c[:2] == ["zfs", "create"]]
    assert 2 < len(creates) < 6          # some repeats went into a kept child, some made their own
    assert set(fake_zfs.datasets()) == {"tank", "tank/scratch", "tank/scratchX", "tank/home"}
