"""SMART output that is no disk's report, under the command's 16 MiB limit (issue 43, case 6): its
values are counted before it is parsed, so memory stays bounded whatever its shape; temperatures a
sensor cannot report (1e308, -273.16 C) are left out, those it can kept as they are. Seeded
variations of each kind."""

from __future__ import annotations

import json
import random
import tracemalloc

import pytest

from tests.conftest import FIXTURES
from zfsnas.sources.smart import FAILED, OK, interpret

MiB = 1 << 20
rng = random.Random(43)


def hostile(kind: str, size: int) -> str:
    """`size` bytes of JSON shaped to make the most objects of each kind."""
    if kind == "empty objects":
        return "[" + ",".join(["{}"] * (size // 3)) + "]"
    if kind == "empty lists":
        return '{"a": [' + ",".join(["[]"] * (size // 3)) + "]}"
    if kind == "keys":
        return "{" + ",".join(f'"k{i}":0' for i in range(size // 10)) + "}"
    if kind == "numbers":
        return '{"ata_smart_attributes": {"table": [' + ",".join(["1.5"] * (size // 4)) + "]}}"
    return '{"smartctl": {"messages": [' + ",".join(['{"string":"x","severity":"error"}'] * (size // 34)) + "]}}"


KINDS = ["empty objects", "empty lists", "keys", "numbers", "messages"]


@pytest.mark.parametrize("kind", KINDS)
def test_output_of_millions_of_values_is_refused_unparsed(kind):
    text = hostile(kind, rng.randint(2, 15) * MiB)
    tracemalloc.start()
    try:
        result = interpret(0, text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * MiB, f"{peak / MiB:.0f} MiB to look at {len(text) / MiB:.0f} MB of output"
    assert result.state == FAILED and "JSON values" in result.reason and "at most 100000" in result.reason


def with_temperature(value) -> str:
    data = json.loads((FIXTURES / "smart" / "sata-hdd.json").read_text())
    data["temperature"]["current"] = value
    data["temperature"]["lifetime_max"] = value
    return json.dumps(data)


@pytest.mark.parametrize("degrees", [1e308, -273.16, -273, 255, -128, 1000, 65262, 2 ** 63,
                                     *(rng.uniform(255, 1e6) for _ in range(3)),
                                     *(rng.uniform(-1e6, -128) for _ in range(3))])
def test_temperatures_no_sensor_reports_are_left_out(degrees):
    result = interpret(0, with_temperature(degrees))
    assert result.state == OK
    assert "temperature" not in result.reading.numbers
    assert ("max", "lifetime") not in result.reading.temperatures


@pytest.mark.parametrize("degrees", [-127, -40, 0, 45, 85.5, 125, 254, *(rng.randint(-127, 254) for _ in range(4))])
def test_temperatures_a_sensor_reports_are_kept(degrees):
    result = interpret(0, with_temperature(degrees))
    assert result.reading.numbers["temperature"] == degrees
    assert result.reading.temperatures[("max", "lifetime")] == degrees
