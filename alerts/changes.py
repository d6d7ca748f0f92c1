"""The zfsnas.changes rule group: what each tuning change did, before against after, for the Changes view.

Owns the recording rules of the Changes dashboard (written into alerts/zfsnas.rules.yml by
alerts/generate.py, between the zfsnas.changes marker lines) and the one definition of the signals
it compares (SIGNALS: their names, units, titles and step expressions), which dashboards/generate.py
reads for the columns and panels. docs/changes.md explains the design; in short:

- Every evaluation (one *step*, 1 minute) records each signal's numbers of that step: a numerator,
  a denominator and the seconds of activity (writes queued, reads, new data), per NAS, per pool and
  (compression) per dataset. Counters enter as the difference to one step earlier, so the steps of a
  window add up to exactly what the counter did over the window.
- A module-parameter or dataset-property change is seen at the first evaluation whose value differs
  from the one a step earlier (the same comparison as the change annotations); it becomes a series of
  its own (`at` = when it was seen) with the value kept for `memory_days`.
- *Before*: at that evaluation, the sums over the window that ends `gap_minutes` before it (the change
  may have happened up to a refresh and a scrape before it was seen), frozen from then on.
- *After*: from the next step on, each step adds its numbers to the change's sums until the window is
  full (the rule reads its own last value), so the view shows the value so far while the window runs.
- A side with fewer than change_min_active_minutes of activity reads NaN: "too little activity".

Time is counted in *minutes* of `minute_seconds` (60): the integration test runs the same rules with
1-second minutes against a real Prometheus. Pure text: no I/O, nothing from the exporter.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Dataset properties that shape I/O (labels of zfs_dataset_info; recordsize holds volblocksize for
# volumes): the change annotations of every dashboard and the property changes of the Changes view.
IO_PROPERTIES = ("compression", "recordsize", "sync", "logbias", "primarycache", "secondarycache", "atime", "dedup",
                 "special_small_blocks")
BEGIN = "  # --- zfsnas.changes: written by alerts/generate.py (alerts/changes.py) from alerts/thresholds.toml ---"
END = "  # --- end of zfsnas.changes ---"
GAP_MINUTES = 5        # the before window ends this long before the change was seen (refreshes, scrape, step)
MEMORY_DAYS = 30       # a change and its values are kept this long (or as long as Prometheus keeps them)
KINDS = ("module parameter", "dataset property")
# What identifies one change among the series (its other labels follow from these).
CHANGE = "nas, instance, what, at"
LEVELS = {"instance": "nas, instance", "pool": "nas, instance, pool", "dataset": "nas, instance, pool, dataset"}
STEP_RULE = "{level}:zfs_signal:step"
GATE = "pool:zfs_writes_queued:step"


@dataclass(frozen=True)
class Signal:
    """One signal of the Changes view. `steps` maps a level (instance, pool, dataset) to its parts
    (num, den, active; or max, active for a peak), each a PromQL expression of one step."""
    name: str
    title: str            # the panel title
    column: str           # the table's column, before "before" / "after"
    unit: str             # Grafana's unit of the value
    activity: str         # what counts as activity (the value needs change_min_active_minutes of it)
    meaning: str          # what the value is, for descriptions and docs
    steps: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def peak(self) -> bool:
        return "max" in self.steps["instance"]

    def level(self, kind: str) -> str:
        """The level a change of `kind` reads: a module parameter is the whole NAS's; a property
        change its dataset's pool (ARC: the NAS; compression: the dataset itself)."""
        if kind == "module parameter" or "pool" not in self.steps and "dataset" not in self.steps:
            return "instance"
        return "dataset" if "dataset" in self.steps else "pool"


def delta(metric: str, step: str) -> str:
    """A counter's growth over the last step (0 across a reset: that step is lost, none is doubled)."""
    return f"clamp_min({metric} - {metric} offset {step}, 0)"


def growth(metric: str, step: str) -> str:
    return f"({metric} - {metric} offset {step})"


def signals(minute: int = 60) -> tuple[Signal, ...]:
    """Every signal with its step expressions, a step being one `minute` (seconds)."""
    step = f"{minute}s"
    host_queued = f"max by (nas, instance) ({GATE})"

    def while_queued(level: str, counter: str) -> str:
        """A pool counter's growth over the step, summed over the pools whose writes were queued."""
        return f"sum by ({LEVELS[level]}) ({delta(counter, step)} and on (nas, instance, pool) {GATE})"

    def queued_seconds(level: str) -> str:
        return f"{minute} * {GATE if level == 'pool' else host_queued}"

    def host_while_queued(level: str, expr: str) -> str:
        """A value of the whole NAS (`expr`, by nas and instance), for the NAS while any pool's writes
        were queued, for a pool while its own were."""
        if level == "instance":
            return f"({expr}) and on (nas, instance) {host_queued}"
        return f"{GATE} * 0 + on (nas, instance) group_left () ({expr})"

    def write_path(num_counter: str, den_counter: str | None = None) -> dict[str, dict[str, str]]:
        return {level: {"num": while_queued(level, num_counter),
                        "den": while_queued(level, den_counter) if den_counter else queued_seconds(level),
                        "active": queued_seconds(level)} for level in ("instance", "pool")}

    def host_wide(num: str, den: str | None = None) -> dict[str, dict[str, str]]:
        """`num` over `den` (or over the seconds writes were queued); a peak (`den` "max") keeps its maximum."""
        out = {}
        for level in ("instance", "pool"):
            if den == "max":
                out[level] = {"max": host_while_queued(level, num), "active": queued_seconds(level)}
            else:
                out[level] = {"num": host_while_queued(level, num),
                              "den": host_while_queued(level, den) if den else queued_seconds(level),
                              "active": queued_seconds(level)}
        return out

    def on_disks(level: str, counter: str) -> str:
        disks = 'max by (nas, instance, device, pool) (zfs_disk_info{pool!=""})'
        return (f"sum by ({LEVELS[level]}) ({delta(counter, step)} * on (nas, instance, device) group_left (pool) "
                f"{disks})")

    def seconds_with(expr: str) -> str:
        return f"({expr} > 0) * 0 + {minute}"

    def latency(io: str) -> dict[str, dict[str, str]]:
        out = {}
        for level in ("instance", "pool"):
            count = on_disks(level, f"zfs_disk_{io}s_total")
            out[level] = {"num": on_disks(level, f"zfs_disk_{io}_time_seconds_total"), "den": count,
                          "active": seconds_with(count)}
        return out

    def new_data(level: str) -> dict[str, str]:
        roots = '{dataset!~".*/.*"}' if level == "instance" else ""   # a pool's root holds all its datasets
        logical = f"{growth('zfs_dataset_logical_used_bytes' + roots, step)} > 0"
        used = f"{growth('zfs_dataset_used_bytes' + roots, step)} > 0"
        both = "and on (nas, instance, pool, dataset)"
        return {"num": f"sum by ({LEVELS[level]}) ({logical} {both} {used})",
                "den": f"sum by ({LEVELS[level]}) ({used} {both} {logical})",
                "active": f"count by ({LEVELS[level]}) ({used} {both} {logical}) * 0 + {minute}"}

    idle = 'node_cpu_seconds_total{mode=~"idle|iowait"}'
    cpu_total = f"sum by (nas, instance) ({delta('node_cpu_seconds_total', step)})"
    cpu_busy = f"{cpu_total} - sum by (nas, instance) ({delta(idle, step)})"
    arc_hits = f"sum by (nas, instance) ({delta('zfs_arc_hits_total', step)})"
    arc_reads = f"sum by (nas, instance) ({delta('zfs_arc_hits_total', step)} + {delta('zfs_arc_misses_total', step)})"
    dirty = f"max by (nas, instance) (max_over_time(zfs_arc_anon_size_bytes[{step}]) / zfs_dirty_data_max_bytes)"
    return (
        Signal("write_throughput", "Write throughput while writes were queued", "write B/s queued", "Bps",
               "writes queued", "bytes the pool wrote per second during the steps its writes were queued (its txgs "
               "carried dirty data at half the throttle point or more): what the pool can do, not what was asked",
               write_path("zfs_pool_txg_written_bytes_total")),
        Signal("txg_sync", "Txg sync time while writes were queued", "txg sync", "s", "writes queued",
               "mean time a txg took to sync, over the txgs synced while writes were queued",
               write_path("zfs_pool_txg_sync_seconds_sum", "zfs_pool_txg_sync_seconds_count")),
        Signal("throttle_delays", "Write throttle delays while writes were queued", "delays/s", "ops",
               "writes queued", "transactions the write throttle delayed per second (dmu_tx dirty_delay)",
               host_wide(f"sum by (nas, instance) ({delta('zfs_dmu_tx_dirty_delay_total', step)})")),
        Signal("dirty_peak", "Dirty data peak vs zfs_dirty_data_max", "dirty peak", "percentunit", "writes queued",
               "the highest live dirty data (ARC anonymous buffers) over zfs_dirty_data_max seen while writes "
               "were queued", host_wide(dirty, "max")),
        Signal("read_latency", "Disk read latency", "read latency", "s", "disk reads",
               "mean time per completed read of the pool's disks (diskstats)", latency("read")),
        Signal("write_latency", "Disk write latency", "write latency", "s", "disk writes",
               "mean time per completed write of the pool's disks (diskstats)", latency("write")),
        Signal("arc_hit_ratio", "ARC hit ratio", "ARC hits", "percentunit", "ARC reads",
               "share of ARC reads served from RAM (the whole NAS: the ARC is shared)",
               {"instance": {"num": arc_hits, "den": arc_reads, "active": seconds_with(arc_reads)}}),
        Signal("compression_new", "Compression ratio of new data", "new data ratio", "x", "new data",
               "growth of logicalused over growth of used, over the steps both grew: what new writes cost on "
               "disk (the NAS: its pools' root datasets; a property change: its dataset)",
               {"instance": new_data("instance"), "dataset": new_data("dataset")}),
        Signal("cpu_busy", "CPU busy while writes were queued", "CPU busy", "percentunit", "writes queued",
               "share of all CPUs busy (neither idle nor iowait; node_exporter) while writes were queued",
               host_wide(cpu_busy, cpu_total)),
    )


SIGNALS = signals()


@dataclass(frozen=True)
class Settings:
    """The numbers the rules are written with: thresholds.toml's window and minimum activity, and
    the length of a minute (60 s; 1 s in the integration test)."""
    window_minutes: int
    min_active_minutes: int
    minute_seconds: int = 60
    gap_minutes: int = GAP_MINUTES
    memory_days: int = MEMORY_DAYS

    def duration(self, minutes: int) -> str:
        return f"{minutes * self.minute_seconds}s"


def settings(thresholds: dict, minute_seconds: int = 60) -> Settings:
    return Settings(int(thresholds["change_window_minutes"]), int(thresholds["change_min_active_minutes"]),
                    minute_seconds)


def union(*exprs: str) -> str:
    return "\nor\n".join(f"({e})" if "\n" not in e else f"(\n{indent(e)}\n)" for e in exprs)


def indent(expr: str, by: int = 2) -> str:
    return "\n".join(" " * by + line for line in expr.splitlines())


def labelled(expr: str, **labels: str) -> str:
    for name, value in labels.items():
        expr = f'label_replace({expr}, "{name}", "{value}", "", "")'
    return expr


# --- the rules -------------------------------------------------------------------------------

def gate_rule(s: Settings) -> str:
    step = s.duration(1)
    return ("max by (nas, instance, pool) (\n"
            f"  {delta('zfs_pool_txg_dirty_ratio_sum', step)}\n"
            f"    / {delta('zfs_pool_txg_dirty_ratio_count', step)}\n"
            "    >= on (nas, instance) group_left ()\n"
            "  (0.5 * max by (nas, instance) (zfs_dirty_data_delay_min_ratio))\n"
            ") * 0 + 1")


def step_rule(signal: Signal, level: str) -> str:
    return union(*[labelled(expr, part=part) for part, expr in signal.steps[level].items()])


def parameter_event(step: str) -> str:
    param = "zfs_module_parameter"
    changed = (f'count_values without () ("to", {param} != {param} offset {step})\n'
               "  * on (nas, instance, job, name) group_left (from)\n"
               f'count_values without () ("from", {param} offset {step})')
    return labelled(f'label_replace(\n{indent(changed)},\n  "what", "$1", "name", "(.*)")', kind="module parameter")


def property_event(step: str) -> str:
    info, before = "zfs_dataset_info", f"zfs_dataset_info offset {step}"
    key = "nas, instance, job, pool, dataset"
    branches = [
        f"max by ({key}, property, from, to) (\n"
        f"  label_replace(label_replace(\n"
        f"    ({info} unless on ({key}, {prop}) {before}) and on ({key}) {before},\n"
        f'    "property", "{prop}", "", ""), "to", "$1", "{prop}", "(.*)")\n'
        f"    * on ({key}) group_left (from)\n"
        f'  max by ({key}, from) (label_replace({before}, "from", "$1", "{prop}", "(.*)"))\n'
        ")"
        for prop in IO_PROPERTIES]
    return labelled(f'label_join(\n{indent(union(*branches))},\n  "what", " ", "dataset", "property")',
                    kind="dataset property")


def event_rule(s: Settings) -> str:
    """Each change seen at this evaluation, value and `at` label the (whole) second it was seen."""
    changes = union(parameter_event(s.duration(1)), property_event(s.duration(1)))
    return f'floor(count_values without () ("at", floor((\n{indent(changes)}\n) * 0 + time())) * 0 + time())'


def window(s: Settings, level: str, signal: Signal, part: str) -> str:
    agg = "max" if part == "max" else "sum"
    return (f"{agg} without (part) ({agg}_over_time({STEP_RULE.format(level=level)}"
            f'{{signal="{signal.name}", part="{part}"}}[{s.duration(s.window_minutes)}] '
            f"offset {s.duration(s.gap_minutes)}))")


def enough(active: str, s: Settings) -> str:
    return f"{active}\n  >= {s.minute_seconds} * scalar(zfsnas:change_min_active_minutes:threshold)"


def before_event_rule(signal: Signal, s: Settings) -> str:
    """The window before each change just seen, at the change's level; NaN (too little activity)
    where it held less than the minimum."""
    members = []
    for kind in KINDS:
        event = f'change:zfs_config:event_timestamp_seconds{{kind="{kind}"}}'
        level = signal.level(kind)
        value = (window(s, level, signal, "max") if signal.peak
                 else f"{window(s, level, signal, 'num')}\n  / {window(s, level, signal, 'den')}")
        value = f"(\n{indent(value)}\n)\nand\n(\n{indent(enough(window(s, level, signal, 'active'), s))}\n)"
        members.append(f"{event} * 0 + on ({LEVELS[level]}) group_left () (\n{indent(value)}\n)")
    members.append("change:zfs_config:event_timestamp_seconds * 0 / 0")
    return union(*members)


def after_step_rule(signal: Signal) -> str:
    """Each open change's step numbers of `signal`, at the change's level, with the change's labels."""
    members = []
    for kind in KINDS:
        level = signal.level(kind)
        for part in signal.steps[level]:
            members.append(f'change:zfs_config:after_open{{kind="{kind}"}} * 0\n'
                           f"  + on ({LEVELS[level]}) group_left (part)\n"
                           f'{STEP_RULE.format(level=level)}{{signal="{signal.name}", part="{part}"}}')
    return union(*members)


def after_sum_rule(s: Settings) -> str:
    """Sums (maxima of a peak) of the steps since the change: the rule's own last value plus this step."""
    def last(selector: str = "") -> str:
        return f"last_over_time(change:zfs_signal_after:sum{selector}[{s.duration(s.window_minutes)}])"

    step = "change:zfs_signal_after:step"
    sums, peaks = '{part!="max"}', '{part="max"}'
    return union(f"{last(sums)} + {step}{sums}",
                 f"{last(peaks)} >= {step}{peaks}",
                 f"{step}{peaks}",
                 f"{last()} and on ({CHANGE}) change:zfs_config:after_open",
                 step)


def after_rule(s: Settings) -> str:
    memory = f"{s.memory_days}d"

    def kept(part: str, agg: str = "sum") -> str:
        return f'{agg} without (part) (last_over_time(change:zfs_signal_after:sum{{part="{part}"}}[{memory}]))'

    value = (f"(\n  {kept('num')}\n    / {kept('den')}\n  or\n  {kept('max', 'max')}\n)\n"
             f"and\n(\n{indent(enough(kept('active'), s))}\n)\n"
             f"and on ({CHANGE}) change:zfs_config:timestamp_seconds")
    started = f"(change:zfs_config:timestamp_seconds < time() - {s.minute_seconds // 2}) * 0 / 0"
    return union(value, *[labelled(started, signal=signal.name) for signal in SIGNALS])


def rules(s: Settings) -> list[tuple[str, str, str, str]]:
    """(record, comment, expr, signal label) of the group, in evaluation order. The rules of one
    record differ in their `signal` label (promtool refuses two rules of one record and labels)."""
    memory = f"{s.memory_days}d"
    half = s.minute_seconds // 2
    after_end = s.window_minutes * s.minute_seconds + half
    per_signal = signals(s.minute_seconds)
    return [
        (GATE, "1 for a pool whose txgs synced in the last step carried dirty data at half the throttle point or "
               "more: its writes were queued (the pool set the pace, not the writers).", gate_rule(s), ""),
        *[(STEP_RULE.format(level=level), f"{signal.name}: its numbers of the last step, per {level}.",
           step_rule(signal, level), signal.name) for level in LEVELS for signal in per_signal if level in signal.steps],
        ("change:zfs_config:event_timestamp_seconds", "A module parameter or an I/O property of a dataset that "
         "differs from its value a step earlier: one series per change (`at`: the second it was seen).",
         event_rule(s), ""),
        ("change:zfs_config:timestamp_seconds", f"Every change seen in the last {s.memory_days} days.",
         f"last_over_time(change:zfs_config:event_timestamp_seconds[{memory}])", ""),
        *[("change:zfs_signal:before_event", f"{signal.name}: the window before a change, taken when it is seen.",
           before_event_rule(signal, s), signal.name) for signal in per_signal],
        ("change:zfs_signal:before", "The before values, kept with their change.",
         f"last_over_time(change:zfs_signal:before_event[{memory}])", ""),
        ("change:zfs_config:after_open", "The changes whose after window runs: from the step after the one "
         "that saw them, for the window's length.",
         f"(change:zfs_config:timestamp_seconds < time() - {half}) > time() - {after_end}", ""),
        *[("change:zfs_signal_after:step", f"{signal.name}: this step's numbers for each open change.",
           after_step_rule(signal), signal.name) for signal in per_signal],
        ("change:zfs_signal_after:sum", "The after window's sums so far (a peak: its maximum); the rule "
         "reads its own last value, only while the window runs.", after_sum_rule(s), ""),
        ("change:zfs_signal:after", "The after window's value so far (kept with the change); NaN while it holds "
         "too little activity.", after_rule(s), ""),
        ("change:zfs_config:after_window_elapsed_ratio", "How much of the after window has passed.",
         "clamp_max(\n  (time() - change:zfs_config:timestamp_seconds)\n"
         f"    / ({s.minute_seconds} * scalar(zfsnas:change_window_minutes:threshold)),\n  1\n)", ""),
    ]


def group(s: Settings) -> str:
    """The zfsnas.changes group between its marker lines."""
    out = [BEGIN, "  # What each tuning change did: docs/changes.md. One evaluation is one step of the windows.",
           "  - name: zfsnas.changes", f"    interval: {s.duration(1)}", "    rules:"]
    for record, comment, expr, signal in rules(s):
        out.append(f"      # {comment}")
        out.append(f"      - record: {record}")
        out.append("        expr: |")
        out.extend(f"          {line}".rstrip() for line in expr.splitlines())
        if signal:
            out.append(f"        labels:\n          signal: {signal}")
    out.append(END)
    return "\n".join(out) + "\n"
