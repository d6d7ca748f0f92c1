"""The seeds' published figures as test data, loaded through the store's public API.

FITS: the astro FITS post (69 GB of FITS files over SMB on an N100, one HDD, zfs_dirty_data_max
16 GiB): compression at 1M, recordsize at zstd-1 (MB/s, ratio, on-disk GiB and seconds of each, as
the post published them), total write size at zstd-1/512K. ISO: the ISO/installer post (503 GiB of
ISOs, compression at 1M; on-disk GiB, % of uncompressed, MiB/s). Only the figures the posts
published are stored; what they did not publish (the FITS copy's logical size, the write-size
sweep's sizes) stays NULL.

LAB: figures written by us (not published) for what the posts lack: three repeats per
configuration with CPU user/system seconds (spread, CPU charts, `recommend` when spreads overlap),
and a CrystalDiskMark zvol run with fio's JSON (the CDM lines).

Shaped like the other experiments our users publish (our numbers, the studies' directions): the
same ISO archive at lz4/zstd-3 x three recordsizes (on-disk size only), a zvol measured with
CrystalDiskMark over iSCSI (volblocksize x NTFS cluster x the NAS's RAM), and the 8-disk study
(4 mirrors vs RAID-Z2 x compression x encryption, whole disks vs GPT partitions, CPU and disk
traffic).
"""

from __future__ import annotations

import json
from pathlib import Path

from zfsnas.bench.running.matrix import parse_size
from zfsnas.store.configuration import pairs
from zfsnas.store.database import Store
from zfsnas.store.schema import ResultFigures

from .configs import configuration

GIB = 2**30
MIB = 2**20
DIRTY_16G = str(16 * GIB)
ONE_HDD = pairs({"vdevs": "data:disk:1", "ashift": "12", "models": "ST8000VN004 x1"})

# compression at 1M: MB/s, wall seconds, ratio, on-disk GiB
FITS_COMPRESSION = {"lz4": (138.0, 540, 1.19, 59.2), "zstd-fast": (191.8, 388, 1.32, 53.1),
                    "zstd-1": (175.0, 425, 1.48, 47.4), "zstd-3": (82.3, 905, 1.51, 46.6)}
# recordsize at zstd-1: MB/s, wall seconds, ratio, on-disk GiB (1M is the compression sweep's cell)
FITS_RECORDSIZE = {"1M": (175.0, 425, 1.48, 47.4), "512K": (190.6, 391, 1.47, 47.5), "256K": (184.0, 405, 1.47, 47.5),
                   "128K": (180.7, 412, 1.44, 48.1)}
FITS_WRITE_SIZE = {"70G": 190.6, "30G": 222.5, "20G": 262.0, "15G": 292.2, "10G": 381.9, "5G": 477.9}
FITS_CORPUS_BYTES = 69_000_000_000
# on-disk GiB, % of uncompressed, MiB/s
ISO_COMPRESSION = {"lz4": (483.6, 96.3, 115.8), "zstd-3": (477.3, 95.0, 115.0), "zstd-7": (476.5, 94.8, 111.0),
                   "zstd-15": (476.3, 94.8, 100.4), "zstd-19": (475.3, 94.6, 24.5), "gzip-9": (478.8, 95.3, 71.6),
                   "off": (502.4, 100.0, 108.9)}


def fits_config(compression: str, recordsize: str, size: str = "all"):
    total = FITS_CORPUS_BYTES if size == "all" else parse_size(size)
    return configuration(matrix="fits-copy", workload="copy", compression=compression, recordsize=recordsize,
                         size=size, pool="astro", layout=ONE_HDD, parameters={"zfs_dirty_data_max": DIRTY_16G},
                         data={"corpus": "/srv/astro/fits", "bytes": str(total), "kind": "filesystem"}, host="n100")


def iso_config(compression: str):
    return configuration(matrix="iso-rsync", workload="copy", compression=compression, recordsize="1M", size="all",
                         pool="tank", data={"corpus": "/srv/isos", "bytes": str(int(502.4 * GIB)), "kind": "filesystem"})


def load_fits(store: Store, run_id: str = "fits-post", start: float = 1.7e9) -> None:
    store.start_matrix(run_id, "fits-copy", "astro/scratch", 13, parameters={"zfs_dirty_data_max": DIRTY_16G})
    cell = 0

    def put(config, **values) -> None:
        nonlocal cell
        cell += 1
        store.record_result(run_id, cell, config, started=start + cell * 1000, finished=start + cell * 1000 + 900,
                            figures=ResultFigures(**values))

    for compression, (mbs, seconds, ratio, gib) in FITS_COMPRESSION.items():
        put(fits_config(compression, "1M"), throughput_bytes_per_second=mbs * 1e6, duration_seconds=float(seconds),
            compressratio=ratio, used_bytes=int(gib * GIB))
    for recordsize, (mbs, seconds, ratio, gib) in FITS_RECORDSIZE.items():
        if recordsize != "1M":   # zstd-1 at 1M is the compression sweep's cell: one configuration
            put(fits_config("zstd-1", recordsize), throughput_bytes_per_second=mbs * 1e6,
                duration_seconds=float(seconds), compressratio=ratio, used_bytes=int(gib * GIB))
    for size, mbs in FITS_WRITE_SIZE.items():
        put(fits_config("zstd-1", "512K", size), throughput_bytes_per_second=mbs * 1e6)
    store.finish_matrix(run_id, "complete")


def load_iso(store: Store, run_id: str = "iso-post", start: float = 1.71e9) -> None:
    store.start_matrix(run_id, "iso-rsync", "tank/scratch", 7)
    logical = int(502.4 * GIB)
    for cell, (compression, (gib, _percent, mib_s)) in enumerate(ISO_COMPRESSION.items(), 1):
        used = int(gib * GIB)
        store.record_result(run_id, cell, iso_config(compression), started=start + cell * 5000,
                            finished=start + cell * 5000 + 4000,
                            figures=ResultFigures(throughput_bytes_per_second=mib_s * MIB, used_bytes=used,
                                                  logicalused_bytes=logical, compressratio=logical / used))
    store.finish_matrix(run_id, "complete")


# --- LAB: ours, not published ---------------------------------------------------------------------

# fio-seq on the 8-disk RAID-Z2: (compression, recordsize) -> three repeats of (MB/s, user s, system s),
# on-disk GiB of the 16 GiB written, over 40 s of 2 CPUs (80 CPU-seconds).
LAB_SEQ = {("lz4", "128K"): ((512.0, 519.0, 508.0), 4.1, 14.0, 9.6),
           ("lz4", "1M"): ((560.0, 571.0, 552.0), 3.6, 12.5, 9.5),
           ("zstd-3", "128K"): ((402.0, 410.0, 395.0), 16.5, 16.8, 8.1),
           ("zstd-3", "1M"): ((455.0, 448.0, 462.0), 15.2, 15.5, 7.9),
           ("off", "128K"): ((530.0, 524.0, 537.0), 1.5, 11.0, 16.0),
           ("off", "1M"): ((566.0, 558.0, 575.0), 1.2, 9.8, 16.0)}
LAB_CPU_SECONDS = 80.0
# CrystalDiskMark on a 16K zvol: workload -> three repeats of (MB/s, IOPS, mean latency us)
LAB_CDM = {"cdm-seq1m-q8t1-read": ((210.004, 200.3, 39911.02), (216.271, 206.3, 38555.55), (212.5, 202.7, 39470.10)),
           "cdm-seq1m-q1t1-read": ((188.411, 179.7, 5563.48), (190.002, 181.2, 5516.97), (186.9, 178.2, 5609.81)),
           "cdm-rnd4k-q32t1-read": ((1.731, 422.6, 75700.12), (1.702, 415.5, 76990.37), (1.745, 426.0, 75093.66)),
           "cdm-rnd4k-q1t1-read": ((0.561, 137.0, 7284.09), (0.574, 140.1, 7121.53), (0.559, 136.5, 7310.22)),
           "cdm-seq1m-q8t1-write": ((188.484, 179.8, 44115.04), (185.2, 176.6, 44897.30), (190.3, 181.5, 43701.88)),
           "cdm-seq1m-q1t1-write": ((184.839, 176.3, 5663.37), (181.0, 172.6, 5783.00), (183.3, 174.8, 5711.40)),
           "cdm-rnd4k-q32t1-write": ((2.831, 691.2, 45796.02), (2.790, 681.2, 46470.11), (2.851, 696.0, 45480.73)),
           "cdm-rnd4k-q1t1-write": ((2.452, 598.6, 1664.09), (2.470, 603.0, 1652.10), (2.430, 593.3, 1679.15))}


def fio_json(workload: str, mb_per_s: float, iops: float, latency_us: float, seconds: float = 5.0) -> str:
    """The parts of fio's --output-format=json our parser and the CDM lines read, for one job."""
    direction = workload.rsplit("-", 1)[1]
    ios = int(iops * seconds)
    figures = {"io_bytes": int(mb_per_s * 1e6 * seconds), "bw_bytes": int(mb_per_s * 1e6), "iops": iops,
               "runtime": int(seconds * 1000), "total_ios": ios,
               "lat_ns": {"min": 1000, "max": int(latency_us * 4000), "mean": latency_us * 1000}}
    idle = {"io_bytes": 0, "bw_bytes": 0, "iops": 0.0, "runtime": 0, "total_ios": 0}
    job = {"jobname": workload, "error": 0, "read": idle, "write": idle, direction: figures}
    return json.dumps({"fio version": "fio-3.33", "jobs": [job]})


def lab_seq_config(compression: str, recordsize: str):
    return configuration(matrix="fio-seq", compression=compression, recordsize=recordsize)


def lab_cdm_config(workload: str):
    return configuration(matrix="cdm-zvol", workload=workload, recordsize="16K", size="1G",
                         properties={"recordsize": "", "volblocksize": "16K"},
                         data={"compressibility": "50", "bytes": str(1 << 30), "kind": "volume", "runtime": "5",
                               "ramp_time": "1"})


def load_lab(store: Store, start: float = 1.72e9) -> None:
    for repeat in range(3):
        run_id = f"lab-seq-{repeat + 1}"
        store.start_matrix(run_id, "fio-seq", "tank/scratch", len(LAB_SEQ))
        for cell, ((compression, recordsize), (mbs, user, system, gib)) in enumerate(LAB_SEQ.items(), 1):
            t = start + repeat * 10_000 + cell * 100
            store.record_result(run_id, cell, lab_seq_config(compression, recordsize), repeat=1, started=t,
                                finished=t + 60, figures=ResultFigures(
                                throughput_bytes_per_second=mbs[repeat] * 1e6,
                                duration_seconds=16 * GIB / (mbs[repeat] * 1e6), used_bytes=int(gib * GIB),
                                logicalused_bytes=16 * GIB, compressratio=16 / gib, cpu_user_seconds=user,
                                cpu_system_seconds=system, cpu_iowait_seconds=6.0,
                                cpu_idle_seconds=LAB_CPU_SECONDS - user - system - 6.0))
        store.finish_matrix(run_id, "complete")
    store.start_matrix("lab-cdm", "cdm-zvol", "tank/scratch", len(LAB_CDM))
    for cell, (workload, repeats) in enumerate(LAB_CDM.items(), 1):
        for repeat, (mbs, iops, lat) in enumerate(repeats, 1):
            t = start + 50_000 + cell * 100 + repeat * 10
            store.record_result("lab-cdm", cell, lab_cdm_config(workload), repeat=repeat, started=t, finished=t + 6,
                                figures=ResultFigures(throughput_bytes_per_second=mbs * 1e6, iops=iops,
                                                      fio_json=fio_json(workload, mbs, iops, lat)))
    store.finish_matrix("lab-cdm", "complete")


# --- shaped like the other experiments our users publish (our numbers) --------------------------------

# CrystalDiskMark 8 on Windows against a zvol over iSCSI (1 GbE), volblocksize 4K / 8K / 16K, NTFS
# clusters 4K / 64K, the NAS's RAM 16 / 32 GiB: NTFS cluster -> test -> {volblocksize: (MB/s, IOPS,
# latency us)} at 16 GiB of RAM. Sequential reads are flat at the link's ~118 MB/s. With 4K clusters,
# random 4K writes collapse at 16K (a read-modify-write of a 16K block for every 4K written: 88.9 ->
# 6.0 MB/s); 64K clusters, each a whole number of volblocks, do not pay it, and there the larger
# blocks win the sequential writes.
ZVOL_CDM = {
    "4K": {
        "cdm-seq1m-q8t1-read": {"4K": (118.2, 112.7, 70912.44), "8K": (118.3, 112.8, 70862.10), "16K": (118.4, 112.9, 70803.95)},
        "cdm-seq1m-q1t1-read": {"4K": (110.9, 105.8, 9448.33), "8K": (111.4, 106.2, 9412.81), "16K": (112.0, 106.8, 9361.06)},
        "cdm-rnd4k-q32t1-read": {"4K": (61.3, 14965.8, 2137.72), "8K": (60.1, 14672.9, 2180.84), "16K": (58.7, 14331.1, 2232.86)},
        "cdm-rnd4k-q1t1-read": {"4K": (9.8, 2392.6, 417.61), "8K": (9.7, 2368.2, 421.91), "16K": (9.5, 2319.3, 430.78)},
        "cdm-seq1m-q8t1-write": {"4K": (112.6, 107.4, 74449.03), "8K": (113.9, 108.6, 73617.20), "16K": (114.8, 109.5, 73053.51)},
        "cdm-seq1m-q1t1-write": {"4K": (104.2, 99.4, 10059.82), "8K": (106.0, 101.1, 9890.30), "16K": (107.7, 102.7, 9734.25)},
        "cdm-rnd4k-q32t1-write": {"4K": (88.9, 21704.1, 1474.19), "8K": (41.2, 10058.6, 3181.37), "16K": (6.0, 1464.8, 21845.25)},
        "cdm-rnd4k-q1t1-write": {"4K": (14.7, 3588.9, 278.53), "8K": (12.1, 2954.1, 338.34), "16K": (5.3, 1293.9, 772.58)},
    },
    "64K": {
        "cdm-seq1m-q8t1-read": {"4K": (118.2, 112.7, 70912.44), "8K": (118.3, 112.8, 70862.10), "16K": (118.4, 112.9, 70803.95)},
        "cdm-seq1m-q1t1-read": {"4K": (110.9, 105.8, 9448.33), "8K": (111.4, 106.2, 9412.81), "16K": (112.0, 106.8, 9361.06)},
        "cdm-rnd4k-q32t1-read": {"4K": (61.3, 14965.8, 2137.72), "8K": (60.1, 14672.9, 2180.84), "16K": (58.7, 14331.1, 2232.86)},
        "cdm-rnd4k-q1t1-read": {"4K": (9.8, 2392.6, 417.61), "8K": (9.7, 2368.2, 421.91), "16K": (9.5, 2319.3, 430.78)},
        "cdm-seq1m-q8t1-write": {"4K": (109.2, 104.1, 76766.24), "8K": (113.0, 107.8, 74184.16), "16K": (117.9, 112.4, 71150.25)},
        "cdm-seq1m-q1t1-write": {"4K": (101.1, 96.4, 10373.44), "8K": (106.3, 101.4, 9864.04), "16K": (112.0, 106.8, 9361.06)},
        "cdm-rnd4k-q32t1-write": {"4K": (86.2, 21044.9, 1520.56), "8K": (86.6, 21142.6, 1513.53),
                                  "16K": (87.0, 21240.2, 1506.58)},
        "cdm-rnd4k-q1t1-write": {"4K": (14.3, 3491.2, 286.30), "8K": (14.5, 3540.0, 282.35), "16K": (14.6, 3564.5, 280.41)},
    },
}
# The NAS's RAM: 32 GiB holds more of the zvol in the ARC, so random reads gain (MB/s and IOPS
# factors per test; latency divided by the same); sequential reads are at the link's speed and writes
# go to the disks either way.
ZVOL_RAM = {"16G": {}, "32G": {"cdm-rnd4k-q32t1-read": 1.40, "cdm-rnd4k-q1t1-read": 1.30, "cdm-seq1m-q1t1-read": 1.01}}


def zvol_cdm_config(workload: str, volblocksize: str, ram: str, ntfs: str):
    return configuration(matrix="zvol-cdm", workload=workload, recordsize="", size="1GiB", pool="tank",
                         properties={"recordsize": "", "volblocksize": volblocksize, "compression": "lz4"},
                         data={"source": "crystaldiskmark 8.0.4", "test_size": "1 GiB", "passes": "5"},
                         user_labels=pairs({"ram": ram, "ntfs_cluster": ntfs, "client": "win11-iscsi"}))


def zvol_figures(workload: str, volblocksize: str, ram: str, ntfs: str) -> tuple[float, float, float]:
    """(MB/s, IOPS, latency us) of one test in one setting, as the seed's import stores them."""
    mbs, iops, latency = ZVOL_CDM[ntfs][workload][volblocksize]
    factor = ZVOL_RAM[ram].get(workload, 1.0)
    return round(mbs * factor, 3), round(iops * factor, 1), round(latency / factor, 2)


def load_zvol_cdm(store: Store, start: float = 1.73e9) -> None:
    """One import per (volblocksize, NTFS cluster, RAM): 12 files of 8 tests, as `import crystaldiskmark` stores them."""
    n = 0
    for volblocksize in ("16K", "4K", "8K"):     # as the user ran them: the default first
        for ntfs in ("4K", "64K"):
            for ram in ("16G", "32G"):
                n += 1
                results = []
                for workload in ZVOL_CDM[ntfs]:
                    mbs, iops, lat = zvol_figures(workload, volblocksize, ram, ntfs)
                    results.append((zvol_cdm_config(workload, volblocksize, ram, ntfs),
                                    ResultFigures(throughput_bytes_per_second=mbs * 1e6, iops=iops, latency_us=lat)))
                t = start + n * 600
                store.import_results(f"cdm-import-{n}", "zvol-cdm", "tank/vm-disk", results, t, t + 300)


# LZ4 vs zstd on an ISO archive (493 GiB), the second time: compression x recordsize, on-disk size only
# (zstd-3 saves about 0.9 %, recordsize at most 0.04 %).
ARCHIVE_LOGICAL = 529_343_922_176
ARCHIVE_USED = {("lz4", "128K"): 510_943_019_008, ("lz4", "512K"): 510_857_371_648, ("lz4", "1M"): 510_841_643_008,
                ("zstd-3", "128K"): 506_288_340_992, ("zstd-3", "512K"): 506_120_568_832,
                ("zstd-3", "1M"): 506_095_403_008}


def archive_config(compression: str, recordsize: str):
    return configuration(matrix="archive-recordsize", workload="copy", compression=compression, recordsize=recordsize,
                         size="all", pool="tank", data={"corpus": "/srv/isos", "bytes": str(ARCHIVE_LOGICAL),
                                                        "kind": "filesystem"})


def load_archive(store: Store, start: float = 1.74e9) -> None:
    store.start_matrix("archive", "archive-recordsize", "tank/scratch", len(ARCHIVE_USED))
    for cell, ((compression, recordsize), used) in enumerate(ARCHIVE_USED.items(), 1):
        store.record_result("archive", cell, archive_config(compression, recordsize), started=start + cell * 7200,
                            finished=start + cell * 7200 + 7000,
                            figures=ResultFigures(used_bytes=used, logicalused_bytes=ARCHIVE_LOGICAL,
                                                  compressratio=round(ARCHIVE_LOGICAL / used, 2)))
    store.finish_matrix("archive", "complete")


# The eight-disk study: the same 8 HDDs as 4 x mirror (pool fast) and as one RAID-Z2 of 8 (pool tank),
# fio SEQ 1M QD8 write and read of text-like data (65 % compressible), none/lz4/zstd-fast-10/zstd-3 x
# aes-256-gcm on/off on whole disks, and off/lz4 without encryption again on GPT partitions; three
# repeats. The study's directions: RAID-Z2 writes slightly faster and reads faster, with 5-10 points
# more (system) CPU; mirrors write every byte to both disks of a pair, RAID-Z2 writes 8/6 of it and
# reads more from the disks than it delivers; encryption costs a little CPU and no throughput; a GPT
# partition changes nothing; lz4 is the fastest compression, zstd-fast-10 reads slower than none,
# zstd-3 compresses best at lower throughput; CPU vs none: lz4 +20 points writing / +10 reading,
# zstd-fast-10 +30/+13, zstd-3 +40/+13.
STUDY_MBS = {("mirror", "seq-write"): 985.0, ("mirror", "seq-read"): 1095.0,      # compression off, encryption off
             ("raidz2", "seq-write"): 1012.0, ("raidz2", "seq-read"): 1402.0}
STUDY_COMPRESSION = {"off": ((1.0, 1.0), 1.00, (0.0, 0.0)), "lz4": ((1.17, 1.13), 2.10, (20.0, 10.0)),   # MB/s factor
                     "zstd-fast-10": ((1.07, 0.92), 1.85, (30.0, 13.0)),                                # (w, r), ratio,
                     "zstd-3": ((0.73, 0.82), 2.45, (40.0, 13.0))}                                      # CPU points (w, r)
STUDY_CPU = {("mirror", "seq-write"): (3.0, 9.0), ("mirror", "seq-read"): (2.0, 6.0),        # user %, system %
             ("raidz2", "seq-write"): (3.0, 16.5), ("raidz2", "seq-read"): (2.0, 12.0)}
STUDY_ENCRYPTION = {"off": (1.0, (0.0, 0.0)), "aes-256-gcm": (0.996, (2.5, 2.0))}   # MB/s factor, CPU points (w, r)
STUDY_PARTITION = {"whole disk": (1.0, 0.0), "partition": (1.002, 0.1)}            # MB/s factor, CPU points
STUDY_DISKS = {"mirror": (2.0, 1.0), "raidz2": (8 / 6, 1.21)}     # disk bytes per byte stored: written, read
STUDY_REPEATS = (1.0, 1.009, 0.992)          # MB/s factors of the three repeats
STUDY_CPU_REPEATS = (0.0, 0.3, -0.2)         # and CPU points
STUDY_CPU_SECONDS = 240.0        # 4 cores over the 60 s measured
STUDY_SECONDS = 60.0
STUDY_LOGICAL = 16 * GIB


def study_cells() -> list[tuple[str, str, str, str, str]]:
    """(layout, partition, compression, encryption, workload) in the order the study ran them."""
    cells = []
    for layout in ("mirror", "raidz2"):
        for compression in STUDY_COMPRESSION:
            for encryption in STUDY_ENCRYPTION:
                cells += [(layout, "whole disk", compression, encryption, w) for w in ("seq-write", "seq-read")]
    for layout in ("mirror", "raidz2"):
        for compression in ("off", "lz4"):
            cells += [(layout, "partition", compression, "off", w) for w in ("seq-write", "seq-read")]
    return cells


def layout_config(layout: str, encryption: str, workload: str, compression: str = "off",
                  partition: str = "whole disk"):
    from .configs import MIRRORS, RAIDZ2

    pairs_ = dict(MIRRORS if layout == "mirror" else RAIDZ2)
    return configuration(matrix="eight-disk-study", workload=workload, compression=compression, encryption=encryption,
                         pool="fast" if layout == "mirror" else "tank", layout=pairs({**pairs_, "partition": partition}),
                         data={"compressibility": "65", "bytes": str(STUDY_LOGICAL), "kind": "filesystem",
                               "runtime": "60", "ramp_time": "10"})


def study_figures(layout: str, partition: str, compression: str, encryption: str, workload: str,
                  repeat: int) -> ResultFigures:
    """One repeat's figures of one cell, from the tables above."""
    w = 0 if workload == "seq-write" else 1
    factors, ratio, cpu_points = STUDY_COMPRESSION[compression]
    enc_factor, enc_points = STUDY_ENCRYPTION[encryption]
    part_factor, part_points = STUDY_PARTITION[partition]
    mbs = STUDY_MBS[layout, workload] * factors[w] * enc_factor * part_factor * STUDY_REPEATS[repeat]
    user, system = STUDY_CPU[layout, workload]
    system += cpu_points[w] + enc_points[w] + part_points + STUDY_CPU_REPEATS[repeat]
    moved = int(mbs * 1e6 * STUDY_SECONDS)
    stored = moved / ratio
    written, read = STUDY_DISKS[layout]
    per_disk = {"written_bytes": int(stored * written / 8), "read_bytes": 0} if w == 0 else \
        {"written_bytes": 0, "read_bytes": int(stored * read / 8)}
    seconds = STUDY_CPU_SECONDS / 100
    return ResultFigures(throughput_bytes_per_second=round(mbs, 1) * 1e6, bytes=moved, duration_seconds=STUDY_SECONDS,
                         compressratio=ratio, used_bytes=int(STUDY_LOGICAL / ratio), logicalused_bytes=STUDY_LOGICAL,
                         cpu_user_seconds=round(user * seconds, 2), cpu_system_seconds=round(system * seconds, 2),
                         cpu_iowait_seconds=round(3.0 * seconds, 2),
                         cpu_idle_seconds=round((100 - user - system - 3.0) * seconds, 2),
                         disks={f"sd{chr(ord('a') + i)}": per_disk for i in range(8)})


def load_layouts(store: Store, start: float = 1.75e9) -> None:
    cells = study_cells()
    for repeat in range(len(STUDY_REPEATS)):
        for layout in ("mirror", "raidz2"):
            run_id = f"study-{layout}-{repeat + 1}"
            mine = [(n, c) for n, c in enumerate(cells, 1) if c[0] == layout]
            store.start_matrix(run_id, "eight-disk-study", f"{'fast' if layout == 'mirror' else 'tank'}/scratch",
                               len(mine))
            for cell, (lay, partition, compression, encryption, workload) in mine:
                t = start + repeat * 100_000 + cell * 100
                store.record_result(run_id, cell, layout_config(lay, encryption, workload, compression, partition),
                                    repeat=repeat + 1, started=t, finished=t + 70,
                                    figures=study_figures(lay, partition, compression, encryption, workload, repeat))
            store.finish_matrix(run_id, "complete")


LOADERS = {"fits": load_fits, "iso": load_iso, "lab": load_lab, "zvol": load_zvol_cdm, "archive": load_archive,
           "layouts": load_layouts}


def seeded_store(path: Path, loaders=("fits", "iso", "lab")) -> Store:
    store = Store(path)
    for name in loaders:
        LOADERS[name](store)
    return store


# The charts shown in docs/benchmarks.md, rendered from these datasets:
#   .venv/bin/python -m tests.bench.seeds docs/img
DOC_CHARTS = (("fits-copy", "throughput"), ("fits-copy", "write-size"), ("fits-copy", "pareto"),
              ("iso-rsync", "space"), ("fio-seq", "cpu"), ("zvol-cdm", "workloads"), ("archive-recordsize", "space"),
              ("eight-disk-study", "workloads"), ("eight-disk-study", "cpu"))


def render_doc_charts(directory: Path) -> list[Path]:
    import tempfile

    from zfsnas.bench.answering import charts
    from zfsnas.bench.answering.report import sections

    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        store = seeded_store(Path(tmp) / "bench.sqlite", tuple(LOADERS))
        found = {s.matrix: s for s in sections(store.results())}
        store.close()
    written = []
    for matrix, name in DOC_CHARTS:
        images = dict(charts.render(found[matrix]))[name]
        for fmt, data in images.items():
            path = directory / f"bench-{matrix}-{name}.{fmt}"
            path.write_bytes(data)
            written.append(path)
    return written


if __name__ == "__main__":
    import sys

    for written_path in render_doc_charts(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/img")):
        print(written_path, written_path.stat().st_size)
