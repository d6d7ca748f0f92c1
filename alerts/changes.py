"""The zfsnas.changes rule group: what each tuning change did, before against after, for the Changes view.

Owns the recording rules of the Changes dashboard (written into alerts/zfsnas.rules.yml by
alerts/generate.py, between the zfsnas.changes marker lines) and the one definition of the signals
it compares (SIGNALS: their names, units, titles and step expressions), which dashboards/generate.py
reads for the columns and panels. docs/changes.md explains the design; in short:

- Every evaluation (one *step*, 1 minute) records each signal's numbers of that step: a numerator,
  a denominator and the seconds of activity (writes queued, reads, new data), per pool and
  (compression) per dataset in one family each, and the NAS's from those (a pool's figures added up,
  the largest where a pool's figure is the NAS's): three step families, not one per signal and
  level, so a change reads its numbers with one selector. Counters enter as the difference to one step earlier, so the steps of a
  window add up to exactly what the counter did over the window.
- A module-parameter or dataset-property change is seen when the value stored a step ago differs
  from the one stored `missed_steps` steps before that: at that many evaluations in a row, so one an
  overloaded Prometheus skips (or a scrape stored late) does not lose it. It is recorded at the
  first of them (the rule reads its own last values) as a series of its own (`at` = when it was
  seen), kept for `memory_days`.
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
MISSED_STEPS = 3       # evaluations in a row that may be skipped without losing a change
MEMORY_DAYS = 30       # a change and its values are kept this long (or as long as Prometheus keeps them)
KINDS = ("module parameter", "dataset property")
# What identifies one change among the series (its other labels follow from these).
CHANGE = "nas, instance, what, at"
GATE = "pool:zfs_writes_queued:step"
# The step numbers: per pool, per NAS (no pool label) and per dataset, one family each.
STEPS = {"pool": "pool:zfs_signal:step", "instance": "instance:zfs_signal:step", "dataset": "dataset:zfs_signal:step"}


@dataclass(frozen=True)
class Signal:
    """One signal of the Changes view: its value over a window is the sum of its steps' `num` over
    the sum of their `den` (or, for a rate, of the seconds of activity `active`; for a peak, the
    largest `max`); it needs change_min_active_minutes of `active`. `scope`: where a dataset-property
    change reads it: its pool (the NAS's figure of a module parameter is the sum or the largest of
    its pools'), the NAS (the ARC is shared) or the dataset itself (the NAS: its pools' roots)."""
    name: str
    title: str            # the panel title
    column: str           # the table's column, before "before" / "after"
    unit: str             # Grafana's unit of the value
    activity: str         # what counts as activity
    meaning: str          # what the value is, for descriptions and docs
    parts: dict[str, str] = field(default_factory=dict)   # part -> step expression at `scope`
    scope: str = "pool"
    host_wide: bool = False   # a pool's figure is the NAS's (delays, CPU): the NAS's is the largest, not the sum

    @property
    def peak(self) -> bool:
        return "max" in self.parts

    @property
    def active_in_den(self) -> bool:
        """Its activity is a step with a denominator (reads, new data): `active` comes from `den`."""
        return "active" not in self.parts

    @property
    def den(self) -> str:
        return "den" if "den" in self.parts else "active"


def delta(metric: str, step: str) -> str:
    """A counter's growth over the last step (0 across a reset: that step is lost, none is doubled)."""
    return f"clamp_min({metric} - {metric} offset {step}, 0)"


def growth(metric: str, step: str) -> str:
    return f"({metric} - {metric} offset {step})"


def signals(minute: int = 60) -> tuple[Signal, ...]:
    """Every signal with its step expressions, a step being one `minute` (seconds)."""
    step = f"{minute}s"
    # The seconds a pool's writes were queued: the time its counters' samples of the step span (a
    # step, but two where a scrape came too late for the one before, whose growth this step then holds).
    written = "zfs_pool_txg_written_bytes_total"
    queued = (f"max by (nas, instance, pool) (timestamp({written}) - timestamp({written} offset {step}))"
              f" and on (nas, instance, pool) {GATE}")

    def while_queued(counter: str) -> str:
        """A pool counter's growth over the step, while the pool's writes were queued."""
        return f"sum by (nas, instance, pool) ({delta(counter, step)} and on (nas, instance, pool) {GATE})"

    def host_while_queued(expr: str) -> str:
        """A figure of the whole NAS (`expr`, by nas and instance) for each pool whose writes were queued."""
        return f"{GATE} * 0 + on (nas, instance) group_left () ({expr})"

    def on_disks(counter: str) -> str:
        disks = 'max by (nas, instance, device, pool) (zfs_disk_info{pool!=""})'
        return (f"sum by (nas, instance, pool) ({delta(counter, step)} * on (nas, instance, device) group_left (pool) "
                f"{disks})")

    def latency(io: str) -> dict[str, str]:
        count = on_disks(f"zfs_disk_{io}s_total")
        return {"num": on_disks(f"zfs_disk_{io}_time_seconds_total"), "den": count}

    logical = f"{growth('zfs_dataset_logical_used_bytes', step)} > 0"
    used = f"{growth('zfs_dataset_used_bytes', step)} > 0"
    both = "and on (nas, instance, pool, dataset)"
    idle = 'node_cpu_seconds_total{mode=~"idle|iowait"}'
    cpu_total = f"sum by (nas, instance) ({delta('node_cpu_seconds_total', step)})"
    arc_reads = f"sum by (nas, instance) ({delta('zfs_arc_hits_total', step)} + {delta('zfs_arc_misses_total', step)})"
    dirty = f"max by (nas, instance) (max_over_time(zfs_arc_anon_size_bytes[{step}]) / zfs_dirty_data_max_bytes)"
    return (
        Signal("write_throughput", "Write throughput while writes were queued", "write B/s queued", "Bps",
               "writes queued", "bytes the pool wrote per second during the steps its writes were queued (its txgs "
               "carried dirty data at half the throttle point or more): what the pool can do, not what was asked",
               {"num": while_queued("zfs_pool_txg_written_bytes_total"), "active": queued}),
        Signal("txg_sync", "Txg sync time while writes were queued", "txg sync", "s", "writes queued",
               "mean time a txg took to sync, over the txgs synced while writes were queued",
               {"num": while_queued("zfs_pool_txg_sync_seconds_sum"),
                "den": while_queued("zfs_pool_txg_sync_seconds_count"), "active": queued}),
        Signal("throttle_delays", "Write throttle delays while writes were queued", "delays/s", "ops",
               "writes queued", "transactions the write throttle delayed per second (dmu_tx dirty_delay)",
               {"num": host_while_queued(f"sum by (nas, instance) ({delta('zfs_dmu_tx_dirty_delay_total', step)})"),
                "active": queued}, host_wide=True),
        Signal("dirty_peak", "Dirty data peak vs zfs_dirty_data_max", "dirty peak", "percentunit", "writes queued",
               "the highest live dirty data (ARC anonymous buffers) over zfs_dirty_data_max seen while writes "
               "were queued", {"max": host_while_queued(dirty), "active": queued}, host_wide=True),
        Signal("read_latency", "Disk read latency", "read latency", "s", "disk reads",
               "mean time per completed read of the pool's disks (diskstats)", latency("read")),
        Signal("write_latency", "Disk write latency", "write latency", "s", "disk writes",
               "mean time per completed write of the pool's disks (diskstats)", latency("write")),
        Signal("arc_hit_ratio", "ARC hit ratio", "ARC hits", "percentunit", "ARC reads",
               "share of ARC reads served from RAM (the whole NAS: the ARC is shared)",
               {"num": f"sum by (nas, instance) ({delta('zfs_arc_hits_total', step)})", "den": arc_reads},
               scope="instance"),
        Signal("compression_new", "Compression ratio of new data", "new data ratio", "x", "new data",
               "growth of logicalused over growth of used, over the steps both grew: what new writes cost on "
               "disk (a module parameter: its pools' root datasets together; a property change: its dataset)",
               {"num": f"sum by (nas, instance, pool, dataset) ({logical} {both} {used})",
                "den": f"sum by (nas, instance, pool, dataset) ({used} {both} {logical})"},
               scope="dataset"),
        Signal("cpu_busy", "CPU busy while writes were queued", "CPU busy", "percentunit", "writes queued",
               "share of all CPUs busy (neither idle nor iowait; node_exporter) while writes were queued",
               {"num": host_while_queued(f"{cpu_total} - sum by (nas, instance) ({delta(idle, step)})"),
                "den": host_while_queued(cpu_total), "active": queued}, host_wide=True),
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
    missed_steps: int = MISSED_STEPS

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


def step_rule(level: str, s: Settings) -> str:
    """The step numbers of every signal measured at `level` (pool, or dataset)."""
    return union(*[labelled(expr, signal=signal.name, part=part) for signal in signals(s.minute_seconds)
                   if signal.scope == level for part, expr in signal.parts.items()])


def instance_step_rule(s: Settings) -> str:
    """The NAS's step numbers: its pools' summed (their largest where a pool's figure is the NAS's,
    and for seconds of activity and peaks), the ARC's, and those of its pools' root datasets."""
    per_signal = signals(s.minute_seconds)
    summed = "|".join(sig.name for sig in per_signal if sig.scope == "pool" and not sig.host_wide)
    from_pools = ('sum by (nas, instance, signal, part) (pool:zfs_signal:step{part=~"num|den", '
                  f'signal=~"{summed}"}})\nor\nmax by (nas, instance, signal, part) (pool:zfs_signal:step)')
    arc = next(sig for sig in per_signal if sig.scope == "instance")
    data = next(sig for sig in per_signal if sig.scope == "dataset")
    roots = [labelled(f'sum by (nas, instance) (dataset:zfs_signal:step{{signal="{data.name}", part="{part}", '
                      f'dataset!~".*/.*"}})', signal=data.name, part=part) for part in data.parts]   # num, den
    return union(from_pools, *[labelled(expr, signal=arc.name, part=part) for part, expr in arc.parts.items()], *roots)


def active_rule(level: str, s: Settings) -> str:
    """The seconds of activity of the signals at `level` that count a step active when it has a
    denominator (disk I/O, ARC reads, new data): from the step numbers just recorded."""
    names = "|".join(sig.name for sig in SIGNALS if sig.active_in_den and (sig.scope == level or level == "instance"
                                                                          and sig.scope != "pool"))
    return f'({STEPS[level]}{{part="den", signal=~"{names}"}} > 0) * 0 + {s.minute_seconds}'


def parameter_event(step: str, earlier: str, lookback: str) -> str:
    """Module parameters whose last value of the step before last differs from their last value
    before it (within `lookback`: a failed scrape, whose stale marker hides the series from a plain
    selector, does not hide a change)."""
    param = "zfs_module_parameter"
    now, before = f"last_over_time({param}[{step}] offset {step})", f"last_over_time({param}[{lookback}] offset {earlier})"
    changed = (f'count_values without () ("to", {now} != {before})\n'
               "  * on (nas, instance, job, name) group_left (from)\n"
               f'count_values without () ("from", {before})')
    return labelled(f'label_replace(\n{indent(changed)},\n  "what", "$1", "name", "(.*)")', kind="module parameter")


def property_event(step: str, earlier: str) -> str:
    """The datasets (that existed a step earlier) with an I/O property unlike a step earlier, one
    series per property changed, `from` and `to` its values. Plain selectors: a range would hold
    the series of both values around a change (the labels are the values), and `from` must be one.
    Each side is a dataset's newest series only: where the series of the old values got no stale
    marker (samples with their own timestamps, a federated or remote-read source, a Prometheus
    restarted) a plain selector still returns it for 5 minutes beside the new one."""
    key = "nas, instance, job, pool, dataset"

    def newest(offset: str) -> str:
        stamps = f"timestamp(zfs_dataset_info offset {offset})"
        return f"({stamps} == on ({key}) group_left () max by ({key}) ({stamps}))"

    info, before = newest(step), newest(earlier)
    branches = [
        f'label_replace(label_replace({info} unless on ({key}, {prop}) {before}, "property", "{prop}", "", ""),\n'
        f'  "to", "$1", "{prop}", "(.*)")\n'
        f"  * on ({key}) group_left (from)\n"
        f'max by ({key}, from) (label_replace({before}, "from", "$1", "{prop}", "(.*)"))'
        for prop in IO_PROPERTIES]
    changed = f"max by ({key}, property, from, to) (\n{indent(union(*branches))}\n)"
    return labelled(f'label_join(\n{indent(changed)},\n  "what", " ", "dataset", "property")',
                    kind="dataset property")


def event_rule(s: Settings) -> str:
    """Each change seen at this evaluation: the evaluation's time, and the whole second in label `at`.
    A value stored a step ago is compared with the one missed_steps + 1 steps ago (not now's with a
    step ago: a sample carries the time its scrape started and is stored when the scrape ends, so an
    evaluation in between would not see it yet and the next would find it on both sides); a change is
    so seen at missed_steps evaluations in a row, and recorded at the first (the rule reads its own
    last ones): one an overloaded Prometheus skips does not lose it."""
    step, earlier = s.duration(1), s.duration(s.missed_steps + 1)
    changes = union(parameter_event(step, earlier, s.duration(s.gap_minutes)), property_event(step, earlier))
    seen = f"last_over_time(change:zfs_config:event_timestamp_seconds[{s.duration(s.missed_steps + 1)}])"
    return (f'count_values without () ("at", floor((\n{indent(changes)}\n) * 0 + time()\n'
            f"  unless on (nas, instance, what, from, to)\n{seen}\n)) * 0 + time()")


# Where a property change reads each signal (see Signal), and how (the labels it joins on).
SCOPES = {"pool": ("(pool|instance)", "nas, instance, pool", ', dataset=""'),
          "instance": ("instance", "nas, instance", ""),
          "dataset": ("(dataset|instance)", "nas, instance, pool, dataset", "")}


def scope_selector(scope: str, **matchers: str) -> str:
    """The step numbers a change reads in `scope`: the NAS's (no pool label: a module parameter's
    change matches them) beside the scope's own (a property change's), limited by `matchers`."""
    families, _, extra = SCOPES[scope]
    more = "".join(f', {k}{v}' for k, v in matchers.items())
    return f'{{__name__=~"{families}:zfs_signal:step"{extra}{more}}}'


def scope_signals(scope: str) -> str:
    return "|".join(sig.name for sig in SIGNALS if sig.scope == scope)


def window(s: Settings, scope: str, part: str, signals: str | None = None) -> str:
    agg = "max" if part == "max" else "sum"
    selector = scope_selector(scope, part=f'="{part}"', signal=f'=~"{signals or scope_signals(scope)}"')
    return (f"{agg} without (part) ({agg}_over_time({selector}[{s.duration(s.window_minutes)}] "
            f"offset {s.duration(s.gap_minutes)}))")


def enough(active: str, s: Settings) -> str:
    return f"{active}\n  >= {s.minute_seconds} * scalar(zfsnas:change_min_active_minutes:threshold)"


def per_signal(expr: str) -> str:
    """`expr` (changes) once for each signal, labelled with it."""
    return union(*[labelled(expr, signal=signal.name) for signal in SIGNALS])


def before_event_rule(s: Settings) -> str:
    """The window before each change just seen, per signal; NaN (too little activity) where it held
    less than the minimum. A module parameter's change (no pool label) joins the NAS's numbers, a
    property change its pool's (or dataset's, or the NAS's where the signal is)."""
    members = []
    for scope, (_, on, _) in SCOPES.items():
        rates = "|".join(sig.name for sig in SIGNALS if sig.scope == scope and sig.den == "active")
        den = window(s, scope, "den") + (f" or {window(s, scope, 'active', rates)}" if rates else "")
        value = (f"(\n  {window(s, scope, 'num')}\n    / ({den})\n  or\n  {window(s, scope, 'max')}\n)\n"
                 f"and\n(\n{indent(enough(window(s, scope, 'active'), s))}\n)")
        members.append(f'change:zfs_config:event_signals{{signal=~"{scope_signals(scope)}"}} * 0\n'
                       f"  + on ({on}, signal) group_left ()\n(\n{indent(value)}\n)")
    members.append("change:zfs_config:event_signals * 0 / 0")
    return union(*members)


def after_step_rule() -> str:
    """Each open change's step numbers, with the change's labels (joined as in before_event_rule)."""
    return union(*[f'change:zfs_config:open_parts{{signal=~"{scope_signals(scope)}"}} * 0\n'
                   f"  + on ({on}, signal, part) group_left ()\n"
                   f'{scope_selector(scope, signal=f"=~{chr(34)}{scope_signals(scope)}{chr(34)}")}'
                   for scope, (_, on, _) in SCOPES.items()])


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

    def kept(part: str, agg: str = "sum", selector: str = "") -> str:
        return (f'{agg} without (part) (last_over_time(change:zfs_signal_after:sum{{part="{part}"{selector}}}'
                f"[{memory}]))")

    rates = f', signal=~"{"|".join(sig.name for sig in SIGNALS if sig.den == "active")}"'
    value = (f"(\n  {kept('num')}\n    / ({kept('den')} or {kept('active', selector=rates)})\n"
             f"  or\n  {kept('max', 'max')}\n)\n"
             f"and\n(\n{indent(enough(kept('active'), s))}\n)\n"
             f"and on ({CHANGE}) change:zfs_config:timestamp_seconds")
    # every signal of every change whose after window started (before_event gave each a value or NaN)
    started = (f"change:zfs_signal:before * 0 / 0\n  and on ({CHANGE})\n"
               f"change:zfs_config:timestamp_seconds < time() - {s.minute_seconds / 2:g}")
    return union(value, started)


def rules(s: Settings) -> list[tuple[str, ...]]:
    """(record, comment, expr[, part]) of the group, in evaluation order; `part` is a static label
    (a second rule of a record: promtool refuses two rules of one record with the same labels)."""
    memory = f"{s.memory_days}d"
    half = s.minute_seconds / 2   # half a step: evaluations fall on whole steps after the one that saw it
    after_end = f"{s.window_minutes * s.minute_seconds + half:g}"
    return [
        (GATE, "1 for a pool whose txgs synced in the last step carried dirty data at half the throttle point or "
               "more: its writes were queued (the pool set the pace, not the writers).", gate_rule(s)),
        (STEPS["pool"], "Each signal's numbers of the last step, per pool.", step_rule("pool", s)),
        (STEPS["pool"], "... their seconds of activity where that is a step with I/O.", active_rule("pool", s),
         "active"),
        (STEPS["dataset"], "... per dataset that grew.", step_rule("dataset", s)),
        (STEPS["dataset"], "...", active_rule("dataset", s), "active"),
        (STEPS["instance"], "... per NAS (no pool label).", instance_step_rule(s)),
        (STEPS["instance"], "...", active_rule("instance", s), "active"),
        ("change:zfs_config:event_timestamp_seconds", "A module parameter or an I/O property of a dataset that "
         "differed from its value a step earlier one step ago: one series per change, when it was seen (`at`: that "
         "second).",
         event_rule(s)),
        ("change:zfs_config:timestamp_seconds", f"Every change seen in the last {s.memory_days} days.",
         f"last_over_time(change:zfs_config:event_timestamp_seconds[{memory}])"),
        ("change:zfs_config:event_signals", "Each change just seen, once per signal.",
         per_signal("change:zfs_config:event_timestamp_seconds")),
        ("change:zfs_signal:before_event", "The window before a change, taken when it is seen.",
         before_event_rule(s)),
        ("change:zfs_signal:before", "The before values, kept with their change.",
         f"last_over_time(change:zfs_signal:before_event[{memory}])"),
        ("change:zfs_config:after_open", "The changes whose after window runs: from the step after the one "
         "that saw them, for the window's length.",
         f"(change:zfs_config:timestamp_seconds < time() - {half:g}) > time() - {after_end}"),
        ("change:zfs_config:open_signals", "Each open change, once per signal ...",
         per_signal("change:zfs_config:after_open")),
        ("change:zfs_config:open_parts", "... and per part of its numbers.",
         union(*[labelled("change:zfs_config:open_signals", part=part) for part in ("num", "den", "active", "max")])),
        ("change:zfs_signal_after:step", "This step's numbers for each open change.", after_step_rule()),
        ("change:zfs_signal_after:sum", "The after window's sums so far (a peak: its maximum); the rule "
         "reads its own last value, only while the window runs.", after_sum_rule(s)),
        ("change:zfs_signal:after", "The after window's value so far (kept with the change); NaN while it holds "
         "too little activity.", after_rule(s)),
        ("change:zfs_config:after_window_elapsed_ratio", "How much of the after window has passed.",
         "clamp_max(\n  (time() - change:zfs_config:timestamp_seconds)\n"
         f"    / ({s.minute_seconds} * scalar(zfsnas:change_window_minutes:threshold)),\n  1\n)"),
    ]


def group(s: Settings) -> str:
    """The zfsnas.changes group between its marker lines."""
    out = [BEGIN, "  # What each tuning change did: docs/changes.md. One evaluation is one step of the windows.",
           "  - name: zfsnas.changes", f"    interval: {s.duration(1)}", "    rules:"]
    for record, comment, expr, *part in rules(s):
        out.append(f"      # {comment}")
        out.append(f"      - record: {record}")
        out.append("        expr: |")
        out.extend(f"          {line}".rstrip() for line in expr.splitlines())
        if part:
            out.append(f"        labels:\n          part: {part[0]}")
    out.append(END)
    return "\n".join(out) + "\n"
