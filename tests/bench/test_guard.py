"""The safety guard: every way a name or a property could lead the runner outside its own children."""

import pytest

from zfsnas.bench.guard import (GuardError, Prop, check_child_name, check_dataset_name, check_own_child,
                                check_scratch, child_name)

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
])
def test_dataset_names_refused(name, reason):
    with pytest.raises(GuardError, match=reason):
        check_dataset_name(name)


def test_plain_names_accepted():
    for name in ("tank/scratch", "tank/bench/scratch-1", "pool_2/a.b:c-d"):
        check_dataset_name(name)


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
])
def test_child_names_refused(child, reason):
    with pytest.raises(GuardError, match=reason):
        check_child_name("tank/scratch", child)


def test_child_name_is_a_direct_named_child():
    assert child_name("tank/scratch", RUN, 3) == f"tank/scratch/zfsnas-bench-{RUN}-3"
    check_child_name("tank/scratch", CHILD)


def test_scratch_accepted_returns_mark():
    assert check_scratch("tank/scratch", SCRATCH_OK) == "init-20261123"


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
