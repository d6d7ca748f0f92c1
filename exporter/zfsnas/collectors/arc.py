"""Collector `arc`: every numeric field of `arcstats`, typed, with the L2ARC as `zfs_l2arc_*`.

Owns the mapping from arcstats field names to metric names. Sizes are gauges in bytes, events
are counters ending in `_total`; demand/prefetch x data/metadata x hit/iohit/miss is one family
(`zfs_arc_reads_total`) and the per-list hits another (`zfs_arc_list_hits_total`), so ratios are
one PromQL line. A field this table does not know (a newer OpenZFS) is still exported: as a
byte gauge if its name says size, otherwise as a plain gauge, never dropped and never mistyped
as a counter.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import NamedTuple

from ..exposition import Families, Family, FieldLayout
from ..sources.kstat import ARCSTATS
from .base import Collector, Report


class ArcMetric(NamedTuple):  # not a dataclass: that module alone costs milliseconds of every start
    kind: str  # "gauge" or "counter"
    name: str
    help: str
    labels: tuple[tuple[str, str], ...] = ()
    scale: float = 1.0


# Names fixed by contract or where the generic rule would read badly.
_EXPLICIT: dict[str, ArcMetric] = {
    "size": ArcMetric("gauge", "zfs_arc_size_bytes", "Current ARC size (arcstats size)."),
    "c": ArcMetric("gauge", "zfs_arc_target_size_bytes", "ARC target size the ARC adapts towards (arcstats c)."),
    "c_min": ArcMetric("gauge", "zfs_arc_min_size_bytes", "Minimum ARC target size (arcstats c_min)."),
    "c_max": ArcMetric("gauge", "zfs_arc_max_size_bytes", "Maximum ARC target size (arcstats c_max)."),
    "p": ArcMetric("gauge", "zfs_arc_mru_target_size_bytes", "Target size of the MRU list, OpenZFS < 2.2 (arcstats p)."),
    "hits": ArcMetric("counter", "zfs_arc_hits_total", "ARC reads served from the ARC (arcstats hits)."),
    "iohits": ArcMetric("counter", "zfs_arc_iohits_total",
                        "ARC reads that found their block already being read, OpenZFS >= 2.2."),
    "misses": ArcMetric("counter", "zfs_arc_misses_total", "ARC reads that went to disk (arcstats misses)."),
    "anon_size": ArcMetric("gauge", "zfs_arc_anon_size_bytes",
                           "Anonymous ARC buffers: dirty data not yet written, the live estimate of dirty data."),
    "meta": ArcMetric("gauge", "zfs_arc_meta_target_ratio",
                      "Share of the ARC targeted for metadata, OpenZFS >= 2.2 (arcstats meta / 2^32).", scale=2.0**-32),
    "pd": ArcMetric("gauge", "zfs_arc_mru_data_target_ratio",
                    "MRU share of ARC data, OpenZFS >= 2.2 (arcstats pd / 2^32).", scale=2.0**-32),
    "pm": ArcMetric("gauge", "zfs_arc_mru_metadata_target_ratio",
                    "MRU share of ARC metadata, OpenZFS >= 2.2 (arcstats pm / 2^32).", scale=2.0**-32),
    "l2_size": ArcMetric("gauge", "zfs_l2arc_size_bytes", "Logical size of the data held in L2ARC (arcstats l2_size)."),
    "l2_asize": ArcMetric("gauge", "zfs_l2arc_allocated_bytes",
                          "Space L2ARC data takes on the cache devices (arcstats l2_asize)."),
    "l2_hdr_size": ArcMetric("gauge", "zfs_l2arc_header_bytes",
                             "ARC memory taken by the headers of L2ARC buffers (arcstats l2_hdr_size)."),
    "l2_hits": ArcMetric("counter", "zfs_l2arc_hits_total", "Reads served from L2ARC (arcstats l2_hits)."),
    "l2_misses": ArcMetric("counter", "zfs_l2arc_misses_total", "ARC misses that L2ARC could not serve (arcstats l2_misses)."),
    "l2_read_bytes": ArcMetric("counter", "zfs_l2arc_read_bytes_total",
                               "Bytes read from L2ARC devices (arcstats l2_read_bytes)."),
    "l2_write_bytes": ArcMetric("counter", "zfs_l2arc_written_bytes_total",
                                "Bytes written to L2ARC devices (arcstats l2_write_bytes)."),
    "memory_all_bytes": ArcMetric("gauge", "zfs_arc_memory_all_bytes",
                                  "Memory the ARC considers in total (arcstats memory_all_bytes)."),
    "memory_free_bytes": ArcMetric("gauge", "zfs_arc_memory_free_bytes",
                                   "Free memory as the ARC sees it (arcstats memory_free_bytes)."),
    "memory_available_bytes": ArcMetric("gauge", "zfs_arc_memory_available_bytes",
                                        "Memory available to the ARC; negative means the ARC must shrink "
                                        "(arcstats memory_available_bytes)."),
    "arc_loaned_bytes": ArcMetric("gauge", "zfs_arc_loaned_bytes", "ARC buffers loaned out (arcstats arc_loaned_bytes)."),
    "arc_no_grow": ArcMetric("gauge", "zfs_arc_no_grow", "1 while the ARC is not allowed to grow (arcstats arc_no_grow)."),
    "l2_data_to_meta_ratio": ArcMetric("gauge", "zfs_l2arc_data_to_meta_ratio",
                                       "Ratio of L2ARC data to its log block metadata (arcstats l2_data_to_meta_ratio)."),
    "l2_log_blk_count": ArcMetric("gauge", "zfs_l2arc_log_blocks",
                                  "L2ARC log blocks on the cache devices (arcstats l2_log_blk_count)."),
    "cached_only_in_progress": ArcMetric("gauge", "zfs_arc_cached_only_in_progress",
                                         "Buffers being read in that are cached only (arcstats cached_only_in_progress)."),
}

# Fields counted as they happen but that are levels, not events.
_GAUGES = {"hash_elements", "hash_elements_max", "hash_chains", "hash_chain_max"}
_BYTE_GAUGES = {"arc_meta_used", "arc_meta_limit", "arc_meta_max", "arc_meta_min", "arc_dnode_limit",
                "arc_tempreserve", "arc_need_free", "arc_sys_free", "arc_raw_size",
                "l2_log_blk_avg_asize", "l2_rebuild_size", "l2_rebuild_asize"}
_STATES = ("anon", "mru", "mru_ghost", "mfu", "mfu_ghost", "uncached")
_STATE_BYTES = re.compile(rf"^(?:{'|'.join(_STATES)})_(?:size|data|metadata|evictable_data|evictable_metadata)$")
_READS = re.compile(r"^(demand|prefetch)_(data|metadata)_(hits|iohits|misses)$")
_LIST_HITS = re.compile(rf"^({'|'.join(_STATES)})_hits$")
_RESULT = {"hits": "hit", "iohits": "iohit", "misses": "miss"}


@functools.lru_cache(maxsize=1024)
def arc_metric(field: str) -> ArcMetric:
    """How one arcstats field is exported."""
    if field in _EXPLICIT:
        return _EXPLICIT[field]
    if match := _READS.match(field):
        access, content, result = match.groups()
        return ArcMetric("counter", "zfs_arc_reads_total",
                         "ARC reads by access (demand/prefetch), content (data/metadata) and result (hit/iohit/miss).",
                         (("access", access), ("content", content), ("result", _RESULT[result])))
    if match := _LIST_HITS.match(field):
        return ArcMetric("counter", "zfs_arc_list_hits_total",
                         "ARC hits by the list the buffer was found on (mru, mfu, their ghosts, uncached).",
                         (("list", match[1]),))
    l2 = field.startswith("l2_")
    prefix = "zfs_l2arc_" if l2 else "zfs_arc_"
    stem = field[3:] if l2 else field.removeprefix("arc_")
    source = f"(arcstats {field})"
    if field in _BYTE_GAUGES or _STATE_BYTES.match(field) or field.endswith(("_size", "_asize")):
        stem = re.sub(r"asize$", "allocated", stem)
        return ArcMetric("gauge", f"{prefix}{stem}_bytes", f"Bytes {source}.")
    if field in _GAUGES:
        return ArcMetric("gauge", f"{prefix}{stem}", f"Current value {source}.")
    if field in KNOWN_COUNTERS:
        return ArcMetric("counter", f"{prefix}{stem.removesuffix('_count')}_total",
                         f"Events since the module loaded {source}.")
    return ArcMetric("gauge", f"{prefix}{stem}", f"Field not known to this exporter version, exported as a gauge {source}.")


# Every other field of arcstats in OpenZFS 0.8 to 2.3 counts events.
KNOWN_COUNTERS = frozenset("""
deleted mutex_miss access_skip evict_skip evict_not_enough evict_l2_cached evict_l2_eligible
evict_l2_eligible_mfu evict_l2_eligible_mru evict_l2_ineligible evict_l2_skip hash_collisions
l2_feeds l2_rw_clash l2_writes_sent l2_writes_done l2_writes_error l2_writes_lock_retry
l2_evict_lock_retry l2_evict_reading l2_evict_l1cached l2_free_on_write l2_abort_lowmem l2_cksum_bad
l2_io_error l2_log_blk_writes l2_rebuild_success l2_rebuild_unsupported l2_rebuild_io_errors
l2_rebuild_dh_errors l2_rebuild_cksum_lb_errors l2_rebuild_lowmem l2_rebuild_bufs
l2_rebuild_bufs_precached l2_rebuild_log_blks memory_throttle_count memory_direct_count
memory_indirect_count arc_prune async_upgrade_sync sync_wait_for_async predictive_prefetch
demand_hit_predictive_prefetch demand_iohit_predictive_prefetch prescient_prefetch
demand_hit_prescient_prefetch demand_iohit_prescient_prefetch l2_evict_l1cached
""".split())


@functools.lru_cache(maxsize=8)
def _layout(fields: tuple[str, ...]) -> FieldLayout:
    """arcstats has the same fields in the same order on every read of a loaded module: its page
    is laid out once per field list."""
    specs = [arc_metric(field) for field in fields]
    return FieldLayout(((spec.name, spec.help, spec.kind, tuple(k for k, _ in spec.labels)),
                        tuple(v for _, v in spec.labels), spec.scale) for spec in specs)


def arc_families(values: dict[str, int]) -> Families:
    """The families of one arcstats read."""
    families = Families()
    families.add_fields(_layout(tuple(values)), list(values.values()))
    return families


class ArcCollector(Collector):
    name = "arc"
    description = "ARC and L2ARC from arcstats"

    def collect(self, report: Report) -> Iterable[Family]:
        return arc_families(self.ctx.kstat.named(ARCSTATS).values)
