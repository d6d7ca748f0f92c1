"""What users bring to `zfsnas-bench import` never costs more than its bounds, never stores
nonsense, never ends in a traceback (issue 43, cases 1, 3, 5, 10, 11): seeded variations of each
kind (tests/fuzz/inputs.py), each refused in one line naming the bound or the value (exit 2,
nothing stored), or imported with exactly its figures. benchmarks/fuzz.py runs many more, each in
a process of its own with its tree's peak RSS."""

from __future__ import annotations

import json
import logging
import signal
from contextlib import contextmanager

import pytest

from tests.fuzz.inputs import import_cases
from zfsnas.bench.cli import main
from zfsnas.store.database import ReadOnlyStore

CASES = import_cases(seed=43, per_kind=1)
HANG_SECONDS = 120       # far past any bound's time: an import still running then hangs (a FIFO read forever)


@contextmanager
def no_hang(seconds: int = HANG_SECONDS):
    def hung(*_):
        raise AssertionError(f"still running after {seconds} s: it hangs")
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("case", CASES, ids=[f"{c.name}-{i}" for i, c in enumerate(CASES)])
def test_each_input_is_imported_whole_or_refused_in_one_line(case, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    work = tmp_path / "in"
    work.mkdir()
    path = case.make(work)
    db = tmp_path / "bench.sqlite"
    with no_hang():
        code = main(["import", case.format, str(path), "--db", str(db), *case.flags])
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    if not case.says:
        assert code == 0 and errors == []
        rows = ReadOnlyStore(db).results()
        assert len(rows) == case.results
        for row in rows:     # every figure a finite number (nothing stored as NULL or Inf for "complete")
            assert row.throughput_bytes_per_second is not None and 0 <= row.throughput_bytes_per_second < 1e300
        return
    assert code == 2
    assert len(errors) == 1 and "\n" not in errors[0], errors
    assert any(fragment in errors[0] for fragment in case.says), errors[0]
    assert "nothing stored" in errors[0]
    assert not db.exists() and not list(tmp_path.glob("bench.sqlite*"))


def test_a_plausible_fio_file_keeps_every_figure(tmp_path):
    """The control the refusals are held against: what a real run prints is stored as printed."""
    from tests.fuzz.inputs import fio_document, fio_job

    document = fio_document([fio_job("a", io_bytes=(1 << 62) + 1, bw=1.5e10, iops=3.25, runtime=1)])
    path = tmp_path / "fio.json"
    path.write_text(json.dumps(document))
    db = tmp_path / "bench.sqlite"
    assert main(["import", "fio", str(path), "--db", str(db)]) == 0
    [row] = ReadOnlyStore(db).results()
    assert (row.bytes, row.throughput_bytes_per_second, row.iops, row.duration_seconds) == ((1 << 62) + 1, 1.5e10,
                                                                                            3.25, 0.001)
    assert row.started == row.finished == document["timestamp"]


def test_every_bound_can_be_raised_by_the_flag_it_names(tmp_path):
    """Past the byte bound: refused; with the flag raised as the message says, imported."""
    from tests.fuzz.inputs import fio_document, fio_job

    document = fio_document([fio_job(f"j{i}") for i in range(1200)])
    path = tmp_path / "fio.json"
    path.write_text(json.dumps(document))
    db = tmp_path / "bench.sqlite"
    assert main(["import", "fio", str(path), "--db", str(db)]) == 2          # 1200 results: past 1000
    assert main(["import", "fio", str(path), "--db", str(db), "--max-results", "1200"]) == 0
    assert len(ReadOnlyStore(db).results()) == 1200
    small = tmp_path / "small.json"
    small.write_text(json.dumps(fio_document([fio_job()])))
    assert main(["import", "fio", str(small), "--db", str(db), "--max-input-bytes", "100"]) == 2
    assert main(["import", "fio", str(small), "--db", str(db), "--max-input-bytes", "100000"]) == 0
