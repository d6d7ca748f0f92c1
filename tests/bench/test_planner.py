"""The planner: exact argv lists per cell, and no command outside the run's own children."""

from pathlib import Path

import pytest

from zfsnas.bench.cli import main
from zfsnas.bench.matrix import Cell, load_matrix, parse_matrix
from zfsnas.bench.planner import PlanOptions, plan_cell, plan_matrix, render_plan

JOBS = Path(__file__).parents[2] / "benchmark-jobs"
RUN = "20261123T150000-beef"
CHILD = f"tank/scratch/zfsnas-bench-{RUN}-1"


def opts(**kw) -> PlanOptions:
    return PlanOptions(**{"scratch": "tank/scratch", "run_id": RUN, "jobs_dir": JOBS,
                          "results_dir": Path("/var/lib/zfsnas/fio") / RUN, **kw})


def test_fio_cell_exact_steps():
    cell = Cell(job="seq-write", compression="zstd-1", recordsize="1M", encryption="off", size="2G", repeat=1,
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
                             "ZFSNAS_RAMP": "15s", "ZFSNAS_COMPRESS": "40", "ZFSNAS_DIRECT": "1"}
    assert plan.steps[2].argv == ("zpool", "sync", "tank")
    assert plan.steps[3].argv == ("zfs", "get", "-Hp", "-o", "property,value",
                                  "compressratio,used,logicalused,referenced,logicalreferenced", CHILD)
    assert plan.steps[4].argv == ("zfs", "destroy", CHILD)
    assert plan.estimate_seconds == 195


def test_scales_keep_mountpoint_and_direct():
    cell = Cell(job="seq-write", compression="lz4", recordsize="128K", encryption="off", size="1G", repeat=1,
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
    cell = Cell(job="write-size", compression="lz4", recordsize="128K", encryption="off", size="1M", repeat=1)
    assert plan_cell(1, cell, opts(size_scale=0.001)).size_bytes == 4 << 20


def test_volume_cell_uses_volblocksize_and_the_zvol_device():
    cell = Cell(job="cdm-rnd4k-q32t1-read", compression="lz4", recordsize="8K", encryption="off", size="1G", repeat=1,
                kind="volume", runtime=5)
    plan = plan_cell(1, cell, opts())
    create = plan.steps[0].argv
    assert create[:5] == ("zfs", "create", "-s", "-V", str((1 << 30) + (1 << 27) + (4 << 20)))
    assert "volblocksize=8K" in create and not any(a.startswith("recordsize") for a in create)
    assert dict(plan.steps[1].env)["ZFSNAS_FILE"] == f"/dev/zvol/{CHILD}"


def test_encrypted_cell_gets_a_key():
    cell = Cell(job="seq-write", compression="off", recordsize="1M", encryption="aes-256-gcm", size="1G", repeat=1)
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
    plans = plan_matrix(m, opts(dirty_data_max=16 << 30))
    children = set()
    for plan in plans:
        assert plan.child.startswith(f"tank/scratch/zfsnas-bench-{RUN}-")
        children.add(plan.child)
        for step in plan.steps:
            if step.argv[0] == "zfs":
                assert step.argv[-1] == plan.child          # create, get, destroy: only this cell's child
            if step.kind == "fio":
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
