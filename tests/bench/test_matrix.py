"""Matrix files: axes, sweeps, repeats, and a clear error for every mistake."""

from pathlib import Path

import pytest

from zfsnas.bench.running.matrix import MatrixError, load_matrix, parse_matrix, parse_size

JOBS = {"seq-write", "seq-read", "write-size", "copy"}
MATRICES = Path(__file__).parents[2] / "benchmark-jobs" / "matrices"


def test_cross_product_and_repeats():
    m = parse_matrix('name = "t"\njobs = ["seq-write", "seq-read"]\ncompression = ["lz4", "off"]\n'
                     'recordsize = ["1M"]\nsize = ["1G"]\nrepeats = 2\nruntime = 5\n', "t.toml", JOBS)
    assert len(m.cells) == 8
    assert [(c.workload, c.compression, c.repeat) for c in m.cells[:4]] == [
        ("seq-write", "lz4", 1), ("seq-write", "lz4", 2), ("seq-write", "off", 1), ("seq-write", "off", 2)]
    assert (m.cells[0].recordsize, m.cells[0].size, m.cells[0].direct, m.cells[0].parameters) == ("1M", "1G", True, ())
    assert m.cells[0].runtime == 5.0 and m.cells[0].encryption == "off"


def test_sweeps_inherit_defaults_and_share_cells_once():
    m = parse_matrix('job = "copy"\ncorpus = "/c"\ncompression = ["zstd-1"]\nrecordsize = ["1M"]\nsize = ["all"]\n'
                     '[[sweep]]\ncompression = ["lz4", "zstd-1"]\n[[sweep]]\nrecordsize = ["1M", "128K"]\n',
                     "fits.toml", JOBS)
    assert m.name == "fits"
    assert [(c.compression, c.recordsize) for c in m.cells] == [("lz4", "1M"), ("zstd-1", "1M"), ("zstd-1", "128K")]


def test_properties_are_carried():
    m = parse_matrix('job = "seq-write"\nsize = "1G"\nruntime = 1\n[properties]\natime = "off"\n', "p", JOBS)
    assert m.cells[0].properties == (("atime", "off"),)


@pytest.mark.parametrize("text, reason", [
    ('job = "seq-write"\nsize = "1G"\nruntime = 1\nbogus = 1\n', "unknown key 'bogus'"),
    ('job = "nope"\nsize = "1G"\n', "unknown job 'nope'"),
    ('job = "seq-write"\n', "no size given"),
    ('size = "1G"\n', "no workload given"),
    ('workload = "seq-write"\nsize = "1G"\ndirect = 1\n', "direct has the wrong type"),
    ('workload = "seq-write"\nsize = "1G"\nparameters = 3\n', "parameters must be a table"),
    ('workload = "seq-write"\nsize = "1G"\n[parameters]\n"zfs dirty" = ["1G"]\n', "not a ZFS module parameter name"),
    ('workload = "seq-write"\nsize = "1G"\n[parameters]\nzfs_txg_timeout = []\n', "parameters.zfs_txg_timeout is empty"),
    ('job = "seq-write"\nsize = "1 lot"\n', "size '1 lot'"),
    ('job = "seq-write"\nsize = "1G"\ncompression = []\n', "compression is empty"),
    ('job = "seq-write"\nsize = "1G"\ncompression = ["lz4 -o mountpoint=/"]\n', "cannot take"),
    ('job = "seq-write"\nsize = "1G"\nrepeats = 0\n', "repeats must be at least 1"),
    ('job = "seq-write"\nsize = "1G"\nrepeats = "2"\n', "repeats has the wrong type"),
    ('job = "seq-write"\nsize = "1G"\nkind = "zvol"\n', "kind must be one of"),
    ('job = "seq-write"\nsize = "1G"\ncompressibility = 150\n', "percentage"),
    ('job = "copy"\nsize = "1G"\n', "needs corpus"),
    ('job = "seq-write"\nsize = "all"\n', "copy job only"),
    ('job = "seq-write"\nsize = "1G"\n[properties]\n"org.zfsnas:scratch" = "x"\n', "not allowed"),
    ('job = "seq-write"\nsize = "1G"\n[properties]\nrecordsize = "1M"\n', "set by the matrix axes"),
    ('name = "a b"\njob = "seq-write"\nsize = "1G"\n', "may hold only"),
    ('job = "seq-write"\nsize = "1G"\nsweep = 3\n', "array of tables"),
    ('job = "seq-write"\nsize = "1G"\n[[sweep]]\nfoo = 1\n', "m.toml sweep 1: unknown key 'foo'"),
    ('job = [seq-write\n', "not valid TOML"),
])
def test_errors_are_clear(text, reason):
    with pytest.raises(MatrixError, match=reason):
        parse_matrix(text, "m.toml", JOBS)


def test_sizes():
    assert parse_size("70G") == 70 << 30
    assert parse_size("512K") == 512 << 10
    assert parse_size("1.5T") == int(1.5 * (1 << 40))
    assert parse_size("4096") == 4096
    assert parse_size("16MiB") == 16 << 20
    assert parse_size("4.4x dirty", 16 << 30) == int(4.4 * (16 << 30))
    assert parse_size("0.5xdirty_data_max", 1000) == 500
    with pytest.raises(MatrixError, match="zfs_dirty_data_max"):
        parse_size("2x dirty", None)


@pytest.mark.parametrize("path", sorted(MATRICES.glob("*.toml")), ids=lambda p: p.stem)
def test_shipped_matrices_are_valid(path):
    jobs = {p.stem for p in path.parents[1].glob("*.fio")} | {"copy"}
    m = load_matrix(path, jobs)
    assert m.cells and m.dataset == "tank/scratch"


def test_shipped_experiments_match_the_issue():
    jobs = {p.stem for p in MATRICES.parent.glob("*.fio")} | {"copy"}
    fits = load_matrix(MATRICES / "fits-copy.toml", jobs)
    assert [c.compression for c in fits.cells[:4]] == ["lz4", "zstd-fast", "zstd-1", "zstd-3"]
    assert {c.recordsize for c in fits.cells} == {"1M", "512K", "256K", "128K"}
    assert [c.size for c in fits.cells if c.size != "all"] == ["70G", "30G", "20G", "15G", "10G", "5G"]
    iso = load_matrix(MATRICES / "iso-rsync.toml", jobs)
    assert [c.compression for c in iso.cells if c.recordsize == "1M"] == [
        "lz4", "zstd-3", "zstd-7", "zstd-15", "zstd-19", "gzip-9", "off"]
    cdm = load_matrix(MATRICES / "cdm-zvol.toml", jobs)
    assert {c.kind for c in cdm.cells} == {"volume"} and len(cdm.cells) == 24
    seq = load_matrix(MATRICES / "fio-seq.toml", jobs)
    assert {(c.runtime, c.ramp_time) for c in seq.cells} == {(180.0, 15.0)}
    assert {c.encryption for c in seq.cells} == {"off", "aes-256-gcm"}
    dirty = load_matrix(MATRICES / "dirty-data.toml", jobs)
    assert all(c.size.endswith("x dirty") for c in dirty.cells)


def test_load_missing_file():
    with pytest.raises(MatrixError, match="No such file"):
        load_matrix("/nonexistent/m.toml")


def test_parameters_compressibility_and_direct_are_axes():
    m = parse_matrix('workloads = ["write-size"]\nsize = "1G"\ncompressibility = [0, 65]\ndirect = false\n'
                     '[parameters]\nzfs_dirty_data_max = ["1G", "4G"]\nzfs_txg_timeout = 10\n', "p.toml", JOBS)
    assert [(c.compressibility, c.parameters) for c in m.cells] == [
        (0, (("zfs_dirty_data_max", "1G"), ("zfs_txg_timeout", "10"))),
        (0, (("zfs_dirty_data_max", "4G"), ("zfs_txg_timeout", "10"))),
        (65, (("zfs_dirty_data_max", "1G"), ("zfs_txg_timeout", "10"))),
        (65, (("zfs_dirty_data_max", "4G"), ("zfs_txg_timeout", "10")))]
    assert {c.direct for c in m.cells} == {False}


def test_a_sweep_overrides_parameters_and_direct():
    m = parse_matrix('workload = "write-size"\nsize = "1G"\n[parameters]\nzfs_txg_timeout = [5]\n'
                     '[[sweep]]\n[[sweep]]\ndirect = false\n[sweep.parameters]\nzfs_txg_timeout = [10, 20]\n',
                     "p.toml", JOBS)
    assert [(c.direct, c.parameters) for c in m.cells] == [
        (True, (("zfs_txg_timeout", "5"),)), (False, (("zfs_txg_timeout", "10"),)),
        (False, (("zfs_txg_timeout", "20"),))]


def shipped(name):
    return load_matrix(MATRICES / f"{name}.toml", {p.stem for p in MATRICES.parent.glob("*.fio")} | {"copy"})


def test_shipped_matrices_reproduce_the_seeds():
    fits = shipped("fits-copy").cells
    sizes = [(c.compression, c.recordsize) for c in fits if c.size != "all"]
    assert len(sizes) == 6 and set(sizes) == {("zstd-1", "512K")}        # the write-size sweep
    iso = shipped("iso-rsync").cells
    recordsizes = {(c.compression, c.recordsize) for c in iso}
    assert {(comp, rs) for comp in ("lz4", "zstd-7") for rs in ("128K", "512K", "1M")} <= recordsizes
    study = shipped("eight-disk-study").cells
    assert len(study) == 2 * 4 * 2 * 2
    assert {c.compression for c in study} == {"off", "lz4", "zstd-fast-10", "zstd-3"}
    assert {c.encryption for c in study} == {"off", "aes-256-gcm"} and {c.compressibility for c in study} == {0, 65}
    assert {c.properties for c in study} == {(("primarycache", "none"), ("secondarycache", "none"))}
    assert {c.direct for c in shipped("dirty-data").cells} == {False}
    sweep = shipped("dirty-data-max").cells
    assert [c.parameters for c in sweep] == [(("zfs_dirty_data_max", v),) for v in ("1G", "4G", "16G")]
    assert {c.direct for c in sweep} == {False}
