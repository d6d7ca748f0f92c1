"""ZfsOps: property parsing, txg wait, and the guard asked again before every destroy."""

import threading

import pytest

from zfsnas.bench.running.guard import GuardError, Prop, check_scratch
from zfsnas.bench.running.zfs import ZfsOps
from zfsnas.sources.model import SourceError

TXGS = ("txg      birth            state ndirty       nread        nwritten     reads    writes   otime        qtime        "
        "wtime        stime\n")
RUN = "20261123T150000-beef"
CHILD = f"tank/scratch/zfsnas-bench-{RUN}-1"
CLEARED = check_scratch("tank/scratch", {"type": Prop("filesystem", "-"), "org.zfsnas:scratch": Prop("init-1", "local")})


class Runner:
    """Answers like zfs/zpool would: an argv prefix maps to stdout, an exception, or a function of argv."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def run(self, argv, timeout=None):
        self.calls.append(list(argv))
        for prefix, answer in self.answers.items():
            if tuple(argv[:len(prefix)]) == prefix:
                result = answer(argv) if callable(answer) else answer
                if isinstance(result, Exception):
                    raise result
                return result
        raise AssertionError(f"unexpected command {argv}")


def txgs_file(tmp_path, rows):
    path = tmp_path / "spl/kstat/zfs/tank/txgs"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(TXGS + "".join(f"{t} 1000 {s} 0 0 0 0 0 0 0 0 0\n" for t, s in rows))


def test_sync_waits_for_the_open_txg_to_commit(tmp_path):
    txgs_file(tmp_path, [(99, "C"), (100, "S"), (101, "O")])

    def sync(argv):
        txgs_file(tmp_path, [(100, "C"), (101, "S"), (102, "O")])   # 101 still syncing
        return ""

    zfs = ZfsOps(Runner({("zpool", "sync"): sync}), procfs=str(tmp_path))
    assert zfs.last_txg("tank") == 101 and not zfs.committed("tank", 101)

    timer = threading.Timer(0.5, lambda: txgs_file(tmp_path, [(101, "C"), (102, "O")]))
    timer.start()
    seconds = zfs.sync(CLEARED, "tank", timeout=10)
    assert 0.4 < seconds < 5 and zfs.committed("tank", 101)


def test_sync_times_out_and_copes_without_txg_history(tmp_path):
    txgs_file(tmp_path, [(100, "O")])
    zfs = ZfsOps(Runner({("zpool", "sync"): ""}), procfs=str(tmp_path))
    with pytest.raises(SourceError, match="txg 100 of tank not committed"):
        zfs.sync(CLEARED, "tank", timeout=0.3)
    txgs_file(tmp_path, [])                                     # zfs_txg_history=0: nothing to wait for
    assert zfs.sync(CLEARED, "tank", timeout=0.3) < 0.3
    assert ZfsOps(Runner({("zpool", "sync"): ""}), procfs=str(tmp_path / "none")).sync(CLEARED, "tank") < 1


def test_get_parses_and_missing_dataset_is_empty():
    zfs = ZfsOps(Runner({("zfs", "get"): lambda a: SourceError(f"{a}: cannot open 'x': dataset does not exist")
                         if a[-1] == "tank/x" else "type\tfilesystem\t-\norg.zfsnas:scratch\tinit\tlocal\n"}))
    props = zfs.get("tank/scratch", "type,org.zfsnas:scratch")
    assert props["type"].value == "filesystem" and props["org.zfsnas:scratch"].source == "local"
    assert zfs.get("tank/x", "type") == {}


def test_destroy_asks_the_guard_every_time():
    answers = {("zfs", "get"): "type\tfilesystem\t-\norigin\t-\t-\norg.zfsnas:bench-run\tsomeone-else\tlocal\n",
               ("zfs", "destroy"): ""}
    runner = Runner(answers)
    with pytest.raises(GuardError, match="belongs to run someone-else"):
        ZfsOps(runner).destroy(CLEARED, CHILD, RUN)
    assert not any(c[:2] == ["zfs", "destroy"] for c in runner.calls)
    answers[("zfs", "get")] = f"type\tfilesystem\t-\norigin\t-\t-\norg.zfsnas:bench-run\t{RUN}\tlocal\n"
    ZfsOps(runner).destroy(CLEARED, CHILD, RUN)
    assert runner.calls[-1] == ["zfs", "destroy", CHILD]


def test_init_refuses_snapshots_volumes_and_clones():
    for answer, reason in (("type\tvolume\t-\norigin\t-\t-\n", "not a plain filesystem"),
                           ("type\tfilesystem\t-\norigin\ttank/a@s\t-\n", "not a plain filesystem")):
        runner = Runner({("zfs", "get"): answer, ("zfs", "set"): ""})
        with pytest.raises(GuardError, match=reason):
            ZfsOps(runner).mark_scratch("tank/x", "init-1")
        assert not any(c[:2] == ["zfs", "set"] for c in runner.calls)
    runner = Runner({("zfs", "get"): "type\tfilesystem\t-\norigin\t-\t-\n", ("zfs", "set"): ""})
    ZfsOps(runner).mark_scratch("tank/x", "init-1")
    assert runner.calls[-1] == ["zfs", "set", "org.zfsnas:scratch=init-1", "tank/x"]


def test_destroy_retries_a_busy_dataset(monkeypatch):
    monkeypatch.setattr("zfsnas.bench.running.zfs.time.sleep", lambda s: None)
    busy = iter([SourceError("cannot destroy: dataset is busy"), ""])
    runner = Runner({("zfs", "get"): f"type\tvolume\t-\norigin\t-\t-\norg.zfsnas:bench-run\t{RUN}\tlocal\n",
                     ("zfs", "destroy"): lambda a: next(busy)})
    ZfsOps(runner).destroy(CLEARED, CHILD, RUN)
    assert [c for c in runner.calls if c[1] == "destroy"] == [["zfs", "destroy", CHILD]] * 2
    runner.answers[("zfs", "destroy")] = SourceError("cannot destroy: filesystem has children")
    with pytest.raises(SourceError, match="has children"):
        ZfsOps(runner).destroy(CLEARED, CHILD, RUN)


def test_sync_only_of_the_scratch_pool():
    runner = Runner({("zpool", "sync"): ""})
    with pytest.raises(GuardError, match="pool 'home' is not the scratch dataset's pool"):
        ZfsOps(runner).sync(CLEARED, "home")
    assert runner.calls == []


def test_recheck_stops_when_the_mark_is_gone_or_changed():
    answers = {("zfs", "get"): "type\tfilesystem\t-\norigin\t-\t-\navailable\t100\t-\norg.zfsnas:scratch\tinit-1\tlocal\n"}
    zfs = ZfsOps(Runner(answers))
    assert zfs.recheck(CLEARED).props["available"].value == "100"
    answers[("zfs", "get")] = "type\tfilesystem\t-\norigin\t-\t-\norg.zfsnas:scratch\t-\t-\n"
    with pytest.raises(GuardError, match="not marked as scratch.*run stopped"):
        zfs.recheck(CLEARED)
    answers[("zfs", "get")] = "type\tfilesystem\t-\norigin\t-\t-\norg.zfsnas:scratch\tinit-2\tlocal\n"
    with pytest.raises(GuardError, match="changed from init-1 to init-2"):
        zfs.recheck(CLEARED)
