"""The planner: exact argv lists per cell, and no command outside the run's own children."""

import re
from pathlib import Path

import pytest

from zfsnas.bench.cli import main
from zfsnas.bench.running.matrix import Cell, load_matrix, parse_matrix
from zfsnas.bench.running.planner import PlanOptions, plan_cell, plan_matrix, render_plan

JOBS = Path(__file__).parents[2] / "benchmark-jobs"
RUN = "20261123T150000-beef"
CHILD = f"tank/scratch/zfsnas-bench-{RUN}-1"


def opts(**kw) -> PlanOptions:
    return PlanOptions(**{"scratch": "tank/scratch", "run_id": RUN, "jobs_dir": JOBS,
                          "results_dir": Path("/var/lib/zfsnas/fio") / RUN, **kw})


def test_fio_cell_exact_steps():
    cell = Cell(workload="seq-write", compression="zstd-1", recordsize="1M", encryption="off", size="2G", repeat=1,
                runtime=180, ramp_time=15, compressibility=40, properties=(("atime", "off"),))
    plan = plan_cell(1, cell, opts())
    assert plan.child == CHILD and plan.pool == "tank" and plan.size_bytes == 2 << 30
    assert [s.kind for s in plan.steps] == ["create", "fio", "sync", "space", "destroy"]
    assert plan.steps[0].argv == ("zfs", "create", "-o", f"org.zfsnas:bench-run={RUN}", "-o", "compression=zstd-1",
                                  "-o", "recordsize=1M", "-o", "atime=off", CHILD)
    fio = plan.steps[1]
    assert fio.argv == ("fio", "--output-format=json", f"--output=/var/lib/zfsnas/fio/{RUN}/zfsnas-bench-{RUN}-1.json",
                        str(JOBS / "seq-write.fio"))
    assert dict(fio.env) == {"ZFSNAS_FILE": f"/{CHILD}/fio.dat", "ZFSNAS_SIZE": str(2 << 30), "ZFSNAS_RUNTIME": "180s",
                             "ZFSNAS_RAMP": "15s", "ZFSNAS_COMPRESS": "40", "ZFSNAS_DIRECT": "1",
                             "ZFSNAS_IOENGINE": "libaio"}
    assert plan.steps[2].argv == ("zpool", "sync", "tank")
    assert plan.steps[3].argv == ("zfs", "get", "-Hp", "-o", "property,value",
                                  "compressratio,used,logicalused,referenced,logicalreferenced", CHILD)
    assert plan.steps[4].argv == ("zfs", "destroy", CHILD)
    assert plan.estimate_seconds == 195


def test_scales_keep_mountpoint_and_direct():
    cell = Cell(workload="seq-write", compression="lz4", recordsize="128K", encryption="off", size="1G", repeat=1,
                runtime=100, ramp_time=10)
    plan = plan_cell(2, cell, opts(size_scale=0.01, time_scale=0.1, keep=True, direct=False, mountpoint="/mnt/s/"))
    env = dict(plan.steps[1].env)
    assert env["ZFSNAS_SIZE"] == str(int((1 << 30) * 0.01)) and env["ZFSNAS_RUNTIME"] == "10s"
    assert env["ZFSNAS_RAMP"] == "1s" and env["ZFSNAS_DIRECT"] == "0"
    # fio reads "0.3" as 0: fractions of a second go as milliseconds
    short = plan_cell(3, cell, opts(time_scale=0.003))
    assert dict(short.steps[1].env)["ZFSNAS_RUNTIME"] == "300ms" and dict(short.steps[1].env)["ZFSNAS_RAMP"] == "30ms"
    assert env["ZFSNAS_FILE"] == f"/mnt/s/zfsnas-bench-{RUN}-2/fio.dat"
    assert "destroy" not in [s.kind for s in plan.steps]


def test_tiny_sizes_are_clamped():
    cell = Cell(workload="write-size", compression="lz4", recordsize="128K", encryption="off", size="1M", repeat=1)
    assert plan_cell(1, cell, opts(size_scale=0.001)).size_bytes == 4 << 20


def test_volume_cell_uses_volblocksize_and_the_zvol_device():
    cell = Cell(workload="cdm-rnd4k-q32t1-read", compression="lz4", recordsize="8K", encryption="off", size="1G", repeat=1,
                kind="volume", runtime=5)
    plan = plan_cell(1, cell, opts())
    create = plan.steps[0].argv
    assert create[:5] == ("zfs", "create", "-s", "-V", str((1 << 30) + (1 << 27) + (4 << 20)))
    assert "volblocksize=8K" in create and not any(a.startswith("recordsize") for a in create)
    assert dict(plan.steps[1].env)["ZFSNAS_FILE"] == f"/dev/zvol/{CHILD}"


def test_encrypted_cell_gets_a_key():
    cell = Cell(workload="seq-write", compression="off", recordsize="1M", encryption="aes-256-gcm", size="1G", repeat=1)
    create = plan_cell(1, cell, opts(key_file="/run/k")).steps[0].argv
    assert ("-o", "encryption=aes-256-gcm") == create[create.index("encryption=aes-256-gcm") - 1:][:2]
    assert "keyformat=hex" in create and "keylocation=file:///run/k" in create


def test_dirty_multiples_and_copy_corpus(tmp_path):
    (tmp_path / "a.fits").write_bytes(b"x" * 3000)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.fits").write_bytes(b"y" * 5000)
    m = parse_matrix(f'job = "copy"\ncorpus = "{tmp_path}"\nsize = ["all", "2x dirty"]\n', "m",
                     {"copy"})
    plans = plan_matrix(m, opts(dirty_data_max=100 << 20))
    assert plans[0].size_bytes == 8000
    assert plans[0].steps[1].argv == ("zfsnas-bench-copy", str(tmp_path), f"/{CHILD}/corpus", "8000")
    assert plans[1].size_bytes == 200 << 20


@pytest.mark.parametrize("path", sorted((JOBS / "matrices").glob("*.toml")), ids=lambda p: p.stem)
def test_every_step_of_every_shipped_matrix_stays_in_the_run(path):
    m = load_matrix(path, {p.stem for p in JOBS.glob("*.fio")} | {"copy"})
    plans = plan_matrix(m, opts(dirty_data_max=16 << 30, ram=64 << 30))
    children = set()
    for plan in plans:
        assert plan.child.startswith(f"tank/scratch/zfsnas-bench-{RUN}-")
        children.add(plan.child)
        for step in plan.steps:
            if step.argv[0] == "zfs":
                assert step.argv[-1] == plan.child          # create, get, destroy: only this cell's child
            if step.kind in ("fio", "prefill"):
                assert Path(step.argv[-1]).exists()        # the job file is shipped
                target = dict(step.env)["ZFSNAS_FILE"]
                assert target.startswith(f"/{plan.child}/") or target == f"/dev/zvol/{plan.child}"
    assert len(children) == len(plans)


def test_dry_run_prints_every_command_and_runs_nothing(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no zfs, no fio: nothing could run
    code = main(["run", "smoke", "--dry-run", "--dataset", "tank/scratch", "--db", str(tmp_path / "db"),
                 "--jobs-dir", str(JOBS)])
    out = capsys.readouterr().out
    assert code == 0
    assert out.count("zfs create ") == 4 and out.count(" fio --output-format=json") == 4
    assert out.count("zpool sync tank") == 4 and out.count("zfs destroy tank/scratch/zfsnas-bench-") == 4
    assert "zfs get -Hp -o property,value,source type,origin,available,mountpoint,org.zfsnas:scratch tank/scratch" in out
    assert not (tmp_path / "db").exists()


def test_plan_refuses_a_bad_dataset_before_anything(caplog, tmp_path):
    assert main(["plan", "smoke", "--dataset", "tank", "--db", str(tmp_path / "db"), "--jobs-dir", str(JOBS)]) == 2
    assert "'tank' is a pool's root dataset" in caplog.text


def test_render_plan_header():
    m = parse_matrix('name = "x"\njob = "write-size"\nsize = "8M"\n', "x", {"write-size"})
    text = render_plan(m, plan_matrix(m, opts()))
    assert text.startswith("# matrix x: 1 cells on tank/scratch; fio time-based runs alone take 0.0 min; "
                           "the largest cell needs 0.01 GiB\n")


def test_a_read_job_lays_out_its_data_outside_the_measured_step():
    cell = Cell(workload="seq-read", compression="lz4", recordsize="1M", encryption="off", size="1G", repeat=1,
                runtime=10)
    plan = plan_cell(1, cell, opts())
    assert [s.kind for s in plan.steps] == ["create", "prefill", "settle", "fio", "sync", "space", "destroy"]
    prefill, settle, fio = plan.steps[1:4]
    assert prefill.argv == ("fio", "--output-format=json",
                            f"--output=/var/lib/zfsnas/fio/{RUN}/zfsnas-bench-{RUN}-1-prefill.json",
                            "--section=prefill", str(JOBS / "seq-read.fio"))
    assert settle.argv == ("zpool", "sync", "tank")
    assert fio.argv == ("fio", "--output-format=json", "--section=seq-read",
                        f"--output=/var/lib/zfsnas/fio/{RUN}/zfsnas-bench-{RUN}-1.json", str(JOBS / "seq-read.fio"))
    assert prefill.env == fio.env


@pytest.mark.parametrize("job", sorted(p.stem for p in JOBS.glob("cdm-*-write.fio")))
def test_crystaldiskmark_writes_lay_out_their_file_first(job):
    """As CrystalDiskMark does: a 4K write into a 16K volblock then pays the read-modify-write."""
    cell = Cell(workload=job, compression="lz4", recordsize="16K", encryption="off", size="1G", repeat=1,
                kind="volume", runtime=5)
    kinds = [s.kind for s in plan_cell(1, cell, opts()).steps]
    assert kinds[:4] == ["create", "prefill", "settle", "fio"]


def test_direct_comes_from_the_matrix_and_the_plan_flags_a_direct_dirty_data_sweep():
    m = parse_matrix('workload = "write-size"\nsize = ["2x dirty"]\n[[sweep]]\n[[sweep]]\ndirect = false\n', "d",
                     {"write-size"})
    plans = plan_matrix(m, opts(dirty_data_max=64 << 20))
    assert [(p.direct, dict(p.steps[1].env)["ZFSNAS_DIRECT"]) for p in plans] == [(True, "1"), (False, "0")]
    text = render_plan(m, plans)
    assert text.count("# note: cell 1 runs with direct=1, which bypasses the dirty-data buffering") == 1
    assert "cell 2 runs with direct=1" not in text
    assert [p.direct for p in plan_matrix(m, opts(dirty_data_max=64 << 20, direct=False))] == [False, False]


def sysfs_tree(tmp_path, **values) -> Path:
    params = tmp_path / "sys/module/zfs/parameters"
    params.mkdir(parents=True)
    for name, value in values.items():
        (params / name).write_text(f"{value}\n")
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/meminfo").write_text("MemTotal:        8039424 kB\nMemFree:         1000000 kB\n")
    return tmp_path


def test_plan_prints_every_parameter_change_and_its_restore(tmp_path):
    from zfsnas.bench.running.parameters import LinuxParameters

    root = sysfs_tree(tmp_path, zfs_dirty_data_max=429496729, zfs_txg_timeout=5)
    params = LinuxParameters(root / "sys", root / "proc")
    m = parse_matrix('workload = "write-size"\nsize = "8M"\ndirect = false\n'
                     '[parameters]\nzfs_dirty_data_max = ["256M", "1G"]\n', "p", {"write-size"})
    plans = plan_matrix(m, opts(ram=params.ram()))
    assert [(c.name, c.value, c.written) for p in plans for c in p.changes] == [
        ("zfs_dirty_data_max", str(256 << 20), "256M"), ("zfs_dirty_data_max", str(1 << 30), "1G")]
    text = render_plan(m, plans, params)
    path = root / "sys/module/zfs/parameters/zfs_dirty_data_max"
    assert (f"# parameter zfs_dirty_data_max: 429496729 -> {256 << 20} (256M); the value in force is saved to the "
            f"database first\necho {256 << 20} > {path}\n") in text
    assert f"# restore zfs_dirty_data_max: {1 << 30} -> 429496729\necho 429496729 > {path}\n" in text
    assert path.read_text() == "429496729\n"  # planning changed nothing


def test_configuration_of_a_planned_cell(tmp_path):
    from zfsnas.bench.running.planner import Environment, configuration
    from zfsnas.store.configuration import pairs

    from .configs import PARAMETERS, RAIDZ2

    m = parse_matrix('workload = "write-size"\nsize = "8M"\ndirect = false\ncompressibility = 33\n'
                     '[properties]\natime = "off"\n[parameters]\nzfs_dirty_data_max = ["256M"]\n', "p",
                     {"write-size"})
    plan = plan_matrix(m, opts(ram=8 << 30))[0]
    env = Environment("tank", RAIDZ2, dict(PARAMETERS), "zfs-2.3.2-1", "nas1")
    config = configuration("p", plan, env)
    assert config.labels == {"matrix": "p", "workload": "write-size", "config": config.id, "compression": "lz4",
                             "recordsize": "128K", "encryption": "off", "size": "8M", "pool": "tank"}
    assert dict(config.properties) == {"compression": "lz4", "recordsize": "128K", "atime": "off"}  # no run mark
    assert dict(config.parameters)["zfs_dirty_data_max"] == str(256 << 20) and config.swept == ("zfs_dirty_data_max",)
    assert dict(config.data) == {"bytes": str(8 << 20), "compressibility": "33", "kind": "filesystem",
                                 "ramp_time": "0", "runtime": "0"}
    assert config.direct == "0" and config.layout == RAIDZ2
    # Another run of the same cell (new run id, new child name) is the same configuration.
    again = plan_matrix(m, opts(ram=8 << 30, run_id="20261124T000000-abcd"))[0]
    assert configuration("p", again, env).id == config.id
    assert configuration("p", plan, Environment("tank", pairs({"vdevs": "data:mirror:2"}), dict(PARAMETERS),
                                                "zfs-2.3.2-1", "nas1")).id != config.id


def test_freebsd_plans_posixaio(capsys, tmp_path, monkeypatch):
    """FreeBSD has no libaio: fio's posixaio engine there, libaio on Linux."""
    import zfsnas.bench.cli as cli

    args = ["plan", "smoke", "--dataset", "tank/scratch", "--db", str(tmp_path / "db"), "--jobs-dir", str(JOBS)]
    assert main(args) == 0
    assert capsys.readouterr().out.count("ZFSNAS_IOENGINE=libaio") == 4
    monkeypatch.setattr(cli, "_freebsd", lambda: True)
    assert main(args) == 0
    assert capsys.readouterr().out.count("ZFSNAS_IOENGINE=posixaio") == 4


def test_every_cell_line_shows_what_varies_and_sizes_after_the_scale(capsys, tmp_path):
    """The eight-disk study: compressibility and encryption vary; 16G at --size-scale 0.001 is 16.4 MiB."""
    assert main(["plan", "eight-disk-study", "--dataset", "tank/scratch", "--size-scale", "0.001", "--set",
                 "ram=32G", "--db", str(tmp_path / "db"), "--jobs-dir", str(JOBS)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("# ")]
    assert lines[1] == "# the cells differ in: workload, compression, encryption, compressibility"
    assert lines[2] == "# labels of every configuration (--set): ram=32G"
    assert lines[3] == ("# cell 1/32: workload=seq-write compression=off recordsize=1M encryption=off size=16G (16.4 MiB) "
                        "compressibility=65% primarycache=none secondarycache=none direct=1 repeat=1")
    assert sum(line.startswith("# cell ") for line in lines) == 32
    assert not (tmp_path / "db").exists()


def test_the_progress_line_names_the_fields_that_vary():
    import io

    from zfsnas.bench.running.runner import Progress

    m = parse_matrix('workload = "seq-write"\nsize = "1G"\ncompressibility = [65, 0]\nencryption = ["off", "aes-256-gcm"]\n',
                     "e", {"seq-write"})
    stream = io.StringIO()
    Progress(plan_matrix(m, opts(size_scale=0.01)), stream).show(2)
    assert stream.getvalue().startswith("[######------------------] 1/4 workload=seq-write encryption=off size=1G "
                                        "(10.2 MiB) compressibility=0% elapsed ")


def test_the_cell_counts_in_the_docs_are_what_plan_says():
    """docs/benchmarks.md's table of shipped matrices: each row's count is the number of cells `plan` prints."""
    docs = (Path(__file__).parents[2] / "docs" / "benchmarks.md").read_text()
    rows = re.findall(r"^\|[^|]+\| `zfsnas-bench run ([a-z0-9-]+) [^`]*` \| (\d+) \|$", docs, re.M)
    assert sorted(name for name, _ in rows) == sorted(p.stem for p in (JOBS / "matrices").glob("*.toml"))
    for name, count in rows:
        matrix = load_matrix(JOBS / "matrices" / f"{name}.toml")
        assert len(matrix.cells) == int(count), name
