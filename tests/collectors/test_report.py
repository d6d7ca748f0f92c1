"""`Report.guard`: a failure inside is recorded and the code after the block runs; what must stop
the exporter (KeyboardInterrupt, SystemExit) is not swallowed."""

import pytest

from zfsnas.collectors.base import Report


def test_guard_records_a_failure_and_goes_on():
    report = Report("txg")
    done = []
    with report.guard("pool tank txgs"):
        done.append("before")
        raise ValueError("row 3 has 5 columns\nsecond line")
    with report.guard("pool tank state"):
        done.append("fine")
    assert done == ["before", "fine"]
    assert report.errors == ["pool tank txgs: row 3 has 5 columns"]
    assert not report.ok


def test_guard_lets_an_interrupt_through():
    report = Report("txg")
    with pytest.raises(KeyboardInterrupt), report.guard("pool tank txgs"):
        raise KeyboardInterrupt
    assert report.ok and report.errors == []


def test_a_return_inside_a_guard_returns():
    def first(report):
        with report.guard("listing pools"):
            return ["tank"]
        return []

    assert first(Report("txg")) == ["tank"]
