"""The safety guard: every way a name or a property could lead the runner outside its own children."""

import itertools

import pytest

from zfsnas.bench.running.guard import (
    Cleared,
    GuardError,
    Prop,
    check_child_name,
    check_dataset_name,
    check_own_child,
    check_scratch,
    check_still_scratch,
    child_name,
)

SCRATCH_OK = {"type": Prop("filesystem", "-"), "origin": Prop("-", "-"),
              "org.zfsnas:scratch": Prop("init-20261123", "local")}
RUN = "20261123T144500-ab12"
CHILD = f"tank/scratch/zfsnas-bench-{RUN}-1"
CHILD_OK = {"type": Prop("filesystem", "-"), "origin": Prop("-", "-"), "org.zfsnas:bench-run": Prop(RUN, "local")}


@pytest.mark.parametrize("name, reason", [
    ("", "no scratch dataset"),
    ("tank", "pool's root"),
    ("tank/scratch@snap", "snapshot"),
    ("tank/scratch#mark", "bookmark"),
    ("tank/scratch/%recv", "temporary clone"),
    ("tank/../home", "'..'"),
    ("tank/./scratch", "'.'"),
    ("tank//scratch", "empty"),
    ("tank/scratch/", "empty"),
    ("/tank/scratch", "empty"),
    ("tank/scr atch", "characters"),
    ("tank/scratch;rm -rf /", "characters"),
    ("tank/scratch\nx", "characters"),
    # `re`'s `$` matches before a final newline: a check written with match/`$` let these through.
    ("tank/scratch\n", "ends with a newline"),
    ("tank/scratch/zfsnas-bench-1\n", "ends with a newline"),
    ("tank/-scratch", "component starting with '-' \\('-scratch'\\)"),
    ("tank/scratch/-o", "component starting with '-'"),
    ("-tank/scratch", "component starting with '-'"),
    ("tank/--", "component starting with '-'"),
])
def test_dataset_names_refused(name, reason):
    with pytest.raises(GuardError, match=reason):
        check_dataset_name(name)


def test_plain_names_accepted():
    for name in ("tank/scratch", "tank/bench/scratch-1", "pool_2/a.b:c-d", "tank/a-", "tank/x-y/z.-", "t/0"):
        assert check_dataset_name(name) is None


@pytest.mark.parametrize("child, reason", [
    ("tank/scratchX/zfsnas-bench-1", "not inside"),           # prefix trick: not a child
    ("tank/scratch-other/zfsnas-bench-1", "not inside"),
    ("tank/scratchzfsnas-bench-1", "not inside"),
    ("tank/scratch", "not inside"),                           # the scratch dataset itself
    ("tank/home", "not inside"),
    ("tank/scratch/../home", "'..'"),
    ("tank/scratch/zfsnas-bench-1/deeper", "not a direct child"),
    ("tank/scratch/zfsnas-bench-1@snap", "snapshot"),
    ("tank/scratch/zfsnas-bench-1#bm", "bookmark"),
    ("tank/scratch/data", "not named by zfsnas-bench"),       # a child someone else made
    ("tank/scratch/zfsnas-bench-", "not named by zfsnas-bench"),
    ("other/scratch/zfsnas-bench-1", "not inside"),
    ("tank/scratch/zfsnas-bench-1\n", "ends with a newline"),
])
def test_child_names_refused(child, reason):
    with pytest.raises(GuardError, match=reason):
        check_child_name("tank/scratch", child)


def test_child_name_is_a_direct_named_child():
    assert child_name("tank/scratch", RUN, 3) == f"tank/scratch/zfsnas-bench-{RUN}-3"
    check_child_name("tank/scratch", CHILD)


def test_scratch_accepted_returns_the_proof():
    cleared = check_scratch("tank/scratch", SCRATCH_OK)
    assert (cleared.dataset, cleared.mark, dict(cleared.props)) == ("tank/scratch", "init-20261123", SCRATCH_OK)


def test_the_proof_is_made_only_by_the_guard():
    with pytest.raises(GuardError, match="made only by guard.check_scratch"):
        Cleared("tank/home", "init-x", SCRATCH_OK)
    with pytest.raises(GuardError, match="made only by guard.check_scratch"):
        Cleared("tank/home", "init-x", SCRATCH_OK, object())


def test_still_scratch_needs_the_same_mark():
    cleared = check_scratch("tank/scratch", SCRATCH_OK)
    assert check_still_scratch(cleared, SCRATCH_OK).mark == "init-20261123"
    gone = {k: v for k, v in SCRATCH_OK.items() if k != "org.zfsnas:scratch"}
    with pytest.raises(GuardError, match=r"^tank/scratch no longer passes the scratch check \('tank/scratch' is not "
                                         r"marked as scratch.*\): run stopped$"):
        check_still_scratch(cleared, gone)
    other = {**SCRATCH_OK, "org.zfsnas:scratch": Prop("init-other", "local")}
    with pytest.raises(GuardError, match="changed from init-20261123 to init-other during the run: run stopped"):
        check_still_scratch(cleared, other)


@pytest.mark.parametrize("change, reason", [
    ({"type": None}, "does not exist"),
    ({"type": Prop("volume", "-")}, "volume, not a filesystem"),
    ({"type": Prop("snapshot", "-")}, "snapshot, not a filesystem"),
    ({"origin": Prop("tank/base@s1", "-")}, "clone of tank/base@s1"),
    ({"org.zfsnas:scratch": None}, "not marked as scratch"),
    ({"org.zfsnas:scratch": Prop("-", "-")}, "not marked as scratch"),
    ({"org.zfsnas:scratch": Prop("init-x", "inherited from tank")}, "inherited from tank, not set on the dataset itself"),
    ({"org.zfsnas:scratch": Prop("init-x", "received")}, "received, not set on the dataset"),
    ({"org.zfsnas:scratch": Prop("init-x", "default")}, "default, not set"),
])
def test_scratch_refused(change, reason):
    props = {k: v for k, v in {**SCRATCH_OK, **change}.items() if v is not None}
    with pytest.raises(GuardError, match=reason):
        check_scratch("tank/scratch", props)


def test_scratch_name_checked_before_properties():
    with pytest.raises(GuardError, match="pool's root"):
        check_scratch("tank", SCRATCH_OK)


def test_own_child_accepted():
    check_own_child("tank/scratch", CHILD, RUN, CHILD_OK)
    check_own_child("tank/scratch", CHILD, RUN, {**CHILD_OK, "type": Prop("volume", "-")})


@pytest.mark.parametrize("change, reason", [
    ({"type": None}, "does not exist"),
    ({"type": Prop("snapshot", "-")}, "is a snapshot, not a filesystem or volume"),
    ({"origin": Prop("tank/scratch/x@s", "-")}, "clone"),
    ({"org.zfsnas:bench-run": None}, "not created by zfsnas-bench"),
    ({"org.zfsnas:bench-run": Prop(RUN, "inherited from tank/scratch")}, "inherited from tank/scratch"),
    ({"org.zfsnas:bench-run": Prop("20200101T000000-0000", "local")}, "belongs to run 20200101T000000-0000"),
])
def test_own_child_refused(change, reason):
    props = {k: v for k, v in {**CHILD_OK, **change}.items() if v is not None}
    with pytest.raises(GuardError, match=reason):
        check_own_child("tank/scratch", CHILD, RUN, props)


def test_own_child_refuses_names_even_with_the_mark():
    with pytest.raises(GuardError, match="not inside"):
        check_own_child("tank/scratch", "tank/scratchX/zfsnas-bench-1", RUN, CHILD_OK)


# --- Every flag combination of `run`, on datasets the guard must refuse: not one change ---------

FLAG_SETS = list(itertools.product((False, True), repeat=5))   # mountpoint, leftover, parameters, pending, keep
MATRIX = ('name = "m"\nworkload = "write-size"\nsize = "4M"\ncompression = ["off", "lz4"]\n'
          '[parameters]\nzfs_txg_timeout = ["9"]\n')
DEAD = "20261120T000000-dead"


def _flag_id(flags: tuple[bool, ...]) -> str:
    names = ("mountpoint", "leftover", "allow-parameters", "pending-restore", "keep")
    return "+".join(n for n, on in zip(names, flags, strict=True) if on) or "plain"


@pytest.mark.parametrize("dataset, reason", [
    ("tank/home", "'tank/home' is not marked as scratch"),
    ("tank/scratch/inherits", "org.zfsnas:scratch is inherited from tank/scratch"),
])
@pytest.mark.parametrize("flags", FLAG_SETS, ids=[_flag_id(f) for f in FLAG_SETS])
def test_no_change_before_the_guard_passed(fake_zfs, tmp_path, caplog, dataset, reason, flags):
    from zfsnas.bench.cli import main
    from zfsnas.store.database import Store

    mountpoint, leftover, parameters, pending, keep = flags
    state = fake_zfs.read()
    state["datasets"]["tank/scratch/inherits"] = {"type": "filesystem", "props": {}}
    if leftover:   # a child a dead run of this database left under the dataset
        state["datasets"][f"{dataset}/zfsnas-bench-{DEAD}-1"] = {
            "type": "filesystem", "props": {"org.zfsnas:bench-run": DEAD}}
    fake_zfs.write(state)
    before = fake_zfs.datasets()
    sysfs = tmp_path / "sys/module/zfs/parameters"
    sysfs.mkdir(parents=True)
    (sysfs / "zfs_txg_timeout").write_text("7\n")      # a dead run's value, its original 5 pending
    db = tmp_path / "db"
    store = Store(db)
    store.start_matrix(DEAD, "m", dataset, 1)
    store.mark_stale(holding_lock=True)
    if pending:
        store.record_parameter(DEAD, "zfs_txg_timeout", "5", "7")
    store.close()
    fio_log = tmp_path / "fio.log"
    fio = tmp_path / "fio"
    fio.write_text(f'#!/bin/sh\necho "$@" >> {fio_log}\nexec fio "$@"\n')
    fio.chmod(0o755)
    matrix = tmp_path / "m.toml"
    matrix.write_text(MATRIX if parameters else MATRIX.split("[parameters]")[0])
    argv = ["run", str(matrix), "--dataset", dataset, *fake_zfs.flags(db), "--path.sysfs", str(tmp_path / "sys"),
            "--fio", str(fio), "--no-direct"]
    argv += ["--mountpoint", str(fake_zfs.root / dataset)] if mountpoint else []
    argv += ["--allow-parameters"] if parameters else []
    argv += ["--keep"] if keep else []

    assert main(argv) == 2
    assert reason in caplog.text
    # The one command run: reading the dataset's properties. No create, destroy, set, sync, fio.
    assert fake_zfs.commands() == [["zfs", "get", "-Hp", "-o", "property,value,source",
                                    "type,origin,available,mountpoint,org.zfsnas:scratch", dataset]]
    assert fake_zfs.datasets() == before
    assert not fio_log.exists()
    assert (sysfs / "zfs_txg_timeout").read_text() == "7\n"


def test_commands_without_a_scratch_check_change_no_dataset(fake_zfs, tmp_path, capsys):
    """`plan`, `run --dry-run` on an unmarked dataset and `restore` run no zfs/zpool command at
    all; `restore` writes back only the module parameter a dead run left changed."""
    from zfsnas.bench.cli import main
    from zfsnas.store.database import Store

    sysfs = tmp_path / "sys/module/zfs/parameters"
    sysfs.mkdir(parents=True)
    (sysfs / "zfs_txg_timeout").write_text("7\n")
    db = tmp_path / "db"
    store = Store(db)
    store.start_matrix(DEAD, "m", "tank/home", 1)
    store.record_parameter(DEAD, "zfs_txg_timeout", "5", "7")
    store.close()
    matrix = tmp_path / "m.toml"
    matrix.write_text(MATRIX.split("[parameters]")[0])
    common = [*fake_zfs.flags(db), "--path.sysfs", str(tmp_path / "sys")]
    assert main(["plan", str(matrix), "--dataset", "tank/home", *common]) == 0
    assert main(["run", str(matrix), "--dataset", "tank/home", "--dry-run", "--keep", *common]) == 0
    assert capsys.readouterr().out.count("zfs create ") == 4     # printed twice, run never
    assert fake_zfs.commands() == []
    assert (sysfs / "zfs_txg_timeout").read_text() == "7\n"
    assert main(["restore", *common]) == 0
    assert "restored zfs_txg_timeout 7 -> 5" in capsys.readouterr().out
    assert (sysfs / "zfs_txg_timeout").read_text() == "5\n"
    assert fake_zfs.commands() == []
