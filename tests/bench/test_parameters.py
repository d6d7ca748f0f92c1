"""Module parameters as a matrix axis: ranges, Linux sysfs (a temp tree via --path.sysfs), FreeBSD
sysctl (recorded outputs), and a restore after every cell, at the end, on SIGTERM and after SIGKILL."""

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zfsnas.bench.cli import main
from zfsnas.bench.running.parameters import (
    FreeBsdParameters,
    LinuxParameters,
    ParameterError,
    ParameterSwitch,
    changes,
    parameter_value,
    restore_pending,
)
from zfsnas.store.database import Store

GiB = 1 << 30
ORIGINAL = 429496729   # the guest's zfs_dirty_data_max (10 % of its RAM)


def host_tree(tmp_path: Path, ram_kib: int = 8039424) -> Path:
    """A procfs/sysfs pair: the real /proc/stat and /proc/diskstats (the probes read them), a known
    MemTotal, and the zfs module's parameter files with known values."""
    root = tmp_path / "host"
    params = root / "sys/module/zfs/parameters"
    params.mkdir(parents=True)
    for name, value in {"zfs_dirty_data_max": ORIGINAL, "zfs_dirty_data_max_percent": 10, "zfs_arc_max": 0,
                        "zfs_txg_timeout": 5, "zfs_vdev_async_write_max_active": 10,
                        "zfs_delay_min_dirty_percent": 60, "zfs_arc_min": 0, "l2arc_write_max": 8388608}.items():
        (params / name).write_text(f"{value}\n")
    (root / "sys/block").mkdir(parents=True)
    (root / "proc").mkdir()
    for name in ("stat", "diskstats"):
        (root / "proc" / name).symlink_to(f"/proc/{name}")
    (root / "proc/meminfo").write_text(f"MemTotal:       {ram_kib} kB\nMemFree:        1000000 kB\n")
    return root


def dirty(root: Path) -> int:
    return int((root / "sys/module/zfs/parameters/zfs_dirty_data_max").read_text())


def test_values_are_checked_against_range_and_ram():
    ram = 8 * GiB
    assert parameter_value("zfs_dirty_data_max", "1G", ram) == GiB
    assert parameter_value("zfs_arc_max", "0", ram) == 0                  # 0: the built-in default
    assert parameter_value("zfs_txg_timeout", "10", ram) == 10
    for name, text, reason in (
            ("zfs_dirty_data_max", "5G", "more than 50% of this host's 8.0 GiB of RAM"),
            ("zfs_dirty_data_max", "1M", "outside the sane range"),
            ("zfs_arc_max", "8G", "more than 90% of this host's 8.0 GiB"),
            ("zfs_txg_timeout", "0", "outside the sane range 1..60"),
            ("zfs_dirty_data_max_percent", "75", "outside the sane range 1..50"),
            ("zfs_txg_timeout", "5s", "not a whole number"),
            ("zfs_dirty_data_max", "lots", "not a size"),
            ("zfs_vdev_raidz_impl", "1", "not one zfsnas-bench may change")):
        with pytest.raises(ParameterError, match=reason):
            parameter_value(name, text, ram)
    with pytest.raises(ParameterError, match="RAM size unknown"):
        parameter_value("zfs_dirty_data_max", "1G", None)
    assert [(c.name, c.value) for c in changes((("zfs_dirty_data_max", "1.5G"),), ram)] == [
        ("zfs_dirty_data_max", str(3 * GiB // 2))]


def test_linux_parameters_on_a_sysfs_tree(tmp_path):
    root = host_tree(tmp_path)
    params = LinuxParameters(root / "sys", root / "proc")
    assert params.ram() == 8039424 * 1024
    assert params.read("zfs_txg_timeout") == "5"
    assert params.identity() == {"zfs_dirty_data_max": str(ORIGINAL), "zfs_dirty_data_max_percent": "10",
                                 "zfs_arc_max": "0", "zfs_txg_timeout": "5", "zfs_vdev_async_write_max_active": "10",
                                 "zfs_delay_min_dirty_percent": "60"}
    assert len(params.read_all()) == 8 and params.read_all()["l2arc_write_max"] == "8388608"
    params.write("zfs_txg_timeout", "10")
    assert params.read("zfs_txg_timeout") == "10"
    with pytest.raises(ParameterError, match="does not exist"):
        params.write("zfs_nonexistent", "1")
    assert not (root / "sys/module/zfs/parameters/zfs_nonexistent").exists()


class RecordedSysctl:
    """`sysctl` on FreeBSD 14.1 (TrueNAS CORE answers alike), in the format recorded there (written
    by us; FreeBSD cannot boot here): `-n name` prints the value, `name=value` prints
    `name: old -> new`, a bare prefix prints `name: value` lines."""

    def __init__(self):
        self.values = {"vfs.zfs.dirty_data_max": "4294967296", "vfs.zfs.dirty_data_max_percent": "10",
                       "vfs.zfs.arc.max": "17179869184", "vfs.zfs.txg.timeout": "5",
                       "vfs.zfs.vdev.async_write_max_active": "10", "vfs.zfs.delay_min_dirty_percent": "60",
                       "hw.physmem": "34221105152"}
        self.calls = []

    def __call__(self, argv):
        self.calls.append(argv)
        assert argv[0] == "sysctl"
        if argv[1] == "-n":
            return self.values[argv[2]] + "\n"
        if "=" in argv[1]:
            name, value = argv[1].split("=", 1)
            old, self.values[name] = self.values[name], value
            return f"{name}: {old} -> {value}\n"
        return "".join(f"{k}: {v}\n" for k, v in sorted(self.values.items()) if k.startswith(argv[1] + "."))


def test_freebsd_parameters_through_sysctl():
    sysctl = RecordedSysctl()
    params = FreeBsdParameters(sysctl)
    assert params.ram() == 34221105152
    assert params.read("zfs_dirty_data_max") == "4294967296"
    assert params.read("zfs_arc_max") == "17179869184" and params.read("zfs_txg_timeout") == "5"
    params.write("zfs_dirty_data_max", str(16 * GiB))
    assert sysctl.calls[-1] == ["sysctl", f"vfs.zfs.dirty_data_max={16 * GiB}"]
    assert params.read("zfs_dirty_data_max") == str(16 * GiB)
    assert params.read_all()["vfs.zfs.txg.timeout"] == "5"
    assert params.shell("zfs_vdev_async_write_max_active", "3") == "sysctl vfs.zfs.vdev.async_write_max_active=3"
    assert params.identity()["zfs_delay_min_dirty_percent"] == "60"


def test_the_original_is_in_the_store_before_the_change(tmp_path):
    """A crash between the two writes must leave something to restore: the journal comes first."""
    root = host_tree(tmp_path)
    store = Store(tmp_path / "db")

    class Crashing(LinuxParameters):
        def write(self, name, value):
            assert [r.original for r in store.pending_parameters("r1")] == [str(ORIGINAL)]
            raise OSError("power cut")

    with pytest.raises(OSError):
        ParameterSwitch(Crashing(root / "sys"), store, "r1").apply(changes((("zfs_dirty_data_max", "1G"),), 8 * GiB))
    assert restore_pending(LinuxParameters(root / "sys"), store) == [f"zfs_dirty_data_max {GiB} -> {ORIGINAL}"]
    assert store.pending_parameters() == [] and dirty(root) == ORIGINAL


# --- the runner with the fake zfs (tests/bench/fakezfs.py), real fio, and the sysfs tree -------------

pytestmark_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed (./dev test installs it)")
SWEEP = ('name = "dirty"\nworkload = "write-size"\nsize = "8M"\ndirect = false\ncompression = ["lz4"]\n'
         '[parameters]\nzfs_dirty_data_max = ["64M", "128M"]\n')


def flags(fake, db, root) -> list[str]:
    return [*fake.flags(db), "--mountpoint", str(fake.root / "tank/scratch"), "--path.sysfs", str(root / "sys"),
            "--path.procfs", str(root / "proc"), "--dataset", "tank/scratch"]


def results(db) -> list[dict]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    return [dict(r) for r in con.execute("SELECT * FROM results ORDER BY id")]


@pytestmark_fio
def test_a_sweep_gives_each_value_its_own_configuration_and_restores(fake_zfs, tmp_path, caplog):
    root = host_tree(tmp_path)
    matrix = tmp_path / "dirty.toml"
    matrix.write_text(SWEEP)
    db = tmp_path / "db"
    # Without --allow-parameters: refused, nothing created, nothing changed.
    assert main(["run", str(matrix), *flags(fake_zfs, db, root)]) == 2
    assert "pass --allow-parameters" in caplog.text and dirty(root) == ORIGINAL
    assert not any(c[:2] == ["zfs", "create"] for c in fake_zfs.commands())
    # A value beyond half of the tree's 7.7 GiB of RAM is refused before anything runs.
    (tmp_path / "big.toml").write_text(SWEEP.replace('"128M"', '"6G"'))
    assert main(["run", str(tmp_path / "big.toml"), "--allow-parameters", *flags(fake_zfs, db, root)]) == 2
    assert "more than 50% of this host's 7.7 GiB of RAM" in caplog.text and dirty(root) == ORIGINAL
    # ... with --dry-run too (it shows what a run would do), and the refusal says how to go on.
    assert main(["run", str(tmp_path / "big.toml"), "--allow-parameters", "--dry-run", *flags(fake_zfs, db, root)]) == 2
    assert ("refused (at most 3.8 GiB here: copy the matrix, lower the value in its [parameters] table and run the "
            "copy by its path; `zfsnas-bench plan COPY.toml` checks it first)") in caplog.text

    assert main(["run", str(matrix), "--allow-parameters", *flags(fake_zfs, db, root)]) == 0
    rows = results(db)
    assert [r["status"] for r in rows] == ["complete", "complete"]
    configs = [json.loads(r["config"]) for r in rows]
    assert [c["parameters"]["zfs_dirty_data_max"] for c in configs] == [str(64 << 20), str(128 << 20)]
    assert [c["parameters"]["zfs_txg_timeout"] for c in configs] == ["5", "5"]
    assert rows[0]["config_id"] != rows[1]["config_id"]
    assert dirty(root) == ORIGINAL                               # restored
    con = sqlite3.connect(db)
    assert con.execute("SELECT name, original, value, restored IS NOT NULL FROM parameter_changes ORDER BY id"
                       ).fetchall() == [("zfs_dirty_data_max", str(ORIGINAL), str(64 << 20), 1),
                                        ("zfs_dirty_data_max", str(ORIGINAL), str(128 << 20), 1)]
    full = json.loads(con.execute("SELECT parameters FROM matrix_runs").fetchone()[0])
    assert full["l2arc_write_max"] == "8388608" and len(full) == 8    # the full set of the run, kept


def test_plan_prints_changes_and_restores_without_changing_anything(fake_zfs, tmp_path, capsys):
    root = host_tree(tmp_path)
    matrix = tmp_path / "dirty.toml"
    matrix.write_text(SWEEP)
    assert main(["plan", str(matrix), *flags(fake_zfs, tmp_path / "db", root)]) == 0
    out = capsys.readouterr().out
    path = root / "sys/module/zfs/parameters/zfs_dirty_data_max"
    assert out.count(f"echo {ORIGINAL} > {path}") == 2 and f"echo {64 << 20} > {path}" in out
    assert f"# restore zfs_dirty_data_max: {128 << 20} -> {ORIGINAL}" in out
    assert dirty(root) == ORIGINAL and not (tmp_path / "db").exists()


def start(fake, tmp_path, root, matrix_text: str) -> tuple[subprocess.Popen, Path]:
    """`zfsnas-bench run --allow-parameters` in its own process, returned once it changed
    zfs_dirty_data_max and fio writes."""
    matrix = tmp_path / "long.toml"
    matrix.write_text(matrix_text)
    db = tmp_path / "db"
    proc = subprocess.Popen([sys.executable, "-m", "zfsnas.bench.cli", "run", str(matrix), "--allow-parameters",
                             *flags(fake, db, root)], env={**os.environ, **fake.env}, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while dirty(root) == ORIGINAL or not list(fake.root.glob("tank/scratch/zfsnas-bench-*/fio.dat")):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    return proc, db


LONG = ('workload = "seq-write"\nsize = "4M"\nruntime = {runtime}\ndirect = false\n'
        '[parameters]\nzfs_dirty_data_max = ["96M"]\nzfs_txg_timeout = ["9"]\n')


@pytestmark_fio
def test_sigterm_mid_cell_restores(fake_zfs, tmp_path):
    root = host_tree(tmp_path)
    proc, db = start(fake_zfs, tmp_path, root, LONG.format(runtime=60))
    assert dirty(root) == 96 << 20
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 130
    assert dirty(root) == ORIGINAL
    assert (root / "sys/module/zfs/parameters/zfs_txg_timeout").read_text() == "5\n"
    assert Store(db).pending_parameters() == []


@pytestmark_fio
def test_sigkill_mid_cell_then_restore_and_run_restores_first(fake_zfs, tmp_path, capsys):
    root = host_tree(tmp_path)
    proc, db = start(fake_zfs, tmp_path, root, LONG.format(runtime=3))
    proc.kill()
    proc.wait()
    assert dirty(root) == 96 << 20                     # nobody restored it: the runner is gone
    assert main(["restore", "--db", str(db), "--path.sysfs", str(root / "sys")]) == 0
    out = capsys.readouterr().out
    assert f"restored zfs_dirty_data_max {96 << 20} -> {ORIGINAL}" in out and "restored zfs_txg_timeout 9 -> 5" in out
    assert dirty(root) == ORIGINAL and Store(db).pending_parameters() == []

    # Killed again; this time the next `run` finds the pending restore and does it first.
    for child in fake_zfs.root.glob("tank/scratch/zfsnas-bench-*/fio.dat"):
        child.unlink()  # the dead run's file: `start` waits for the new run's
    proc, db = start(fake_zfs, tmp_path, root, LONG.format(runtime=3))
    proc.kill()
    proc.wait()
    time.sleep(3.5)
    assert dirty(root) == 96 << 20
    (tmp_path / "plain.toml").write_text('workload = "write-size"\nsize = "4M"\ndirect = false\n')
    assert main(["run", str(tmp_path / "plain.toml"), *flags(fake_zfs, db, root)]) == 0
    assert dirty(root) == ORIGINAL
    assert [r["status"] for r in results(db)] == ["incomplete", "incomplete", "complete"]
