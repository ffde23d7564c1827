"""The replay view: per survey workload, every store's rates against the machine's limits, whether it
kept up with the workload's schedule, and sample bandwidth vs item size; replay.csv holds the same rows."""
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Optional

from rlbench.families.replay.driver import KWARGS, PREFIX, WORKLOADS, stated_checks
from rlbench.report import charts
from rlbench.report.csv_reporter import to_csv
from rlbench.report.format import esc, figure, fixed, grouped, pct, size, with_ci
from rlbench.report.table import Column, bad_if, table
from rlbench.results.stats import median_ci, ratio_ci
from rlbench.results.text import is_num
from rlbench.workload import kv_label

OURS = ("numpy-ring", "shm-ring", "memmap")
PEERS = ("sb3-replay", "tianshou-replay", "torchrl-tensor", "torchrl-memmap")  # the targets' comparison set
LIMIT_LINES = (("memcpy_1core_gbps", "memcpy 1 core", charts.REFERENCE_COLOURS[0]),
               ("memcpy_allcore_gbps", "memcpy all cores", charts.REFERENCE_COLOURS[1]),
               ("disk_random_read_1m_gbps", "disk 1 MiB random", charts.REFERENCE_COLOURS[2]))
BESIDE = "beside"  # a field's metadata key: replay.csv leaves that field out


def _beside():
    """A field of a replay row that replay.csv leaves out: what the chart and the targets read beside it."""
    return field(metadata={BESIDE: True})


@dataclass(frozen=True)
class ReplayRow:
    """One replay cell as its table, chart and replay.csv read it (medians of repeats): what it sustained and
    against which limit. keeps_up counts the repeats that kept up, e.g. '3/3' (target mode, else ''); the lags
    are the most any repeat fell behind its schedule; limit_frac has the bootstrap 95% CI of the median of its
    repeats' fractions (rlbench.results.stats.median_ci)."""
    workload: str
    mode: str
    store: str                      # the adapter and its options
    actors: int
    item_bytes: int
    capacity_items: int
    capacity_scale: float
    page_cache: str
    n: int
    status: str
    items_per_s: float
    mb_per_s: Optional[float]
    add_items_per_s: float
    sample_items_per_s: float
    bound: str
    limit_gbps: Optional[float]
    limit_frac: Optional[float]
    limit_frac_ci_low: Optional[float]
    limit_frac_ci_high: Optional[float]
    sample_latency_p99_ms: float
    sample_latency_p999_ms: float
    add_latency_p99_ms: float
    keeps_up: str
    sample_lag_max_ms: float
    add_lag_max_ms: float
    max_reuse: Optional[int]
    reuse_mean: float
    reuse_max: float
    error: str
    adapter: str = _beside()
    cell_id: str = _beside()
    cv: float = _beside()                                    # of its steps/s: the chart's hover
    mb_per_s_repeats: tuple = _beside()                      # each repeat's MB/s: the targets' ratio CIs
    mb_per_s_ci_low: Optional[float] = _beside()             # the 95% CI of its MB/s: the chart's bars
    mb_per_s_ci_high: Optional[float] = _beside()

    @property
    def worst_lag(self):
        """The most either schedule fell behind, '' without lags (not target mode): the lag column's sort key."""
        lags = [v for v in (self.sample_lag_max_ms, self.add_lag_max_ms) if is_num(v)]
        return max(lags) if lags else ""

    @property
    def series(self) -> str:
        """Its line on the bandwidth chart: the store, and its actors when more than one."""
        return f"{self.store}, {self.actors} actor(s)" if self.actors > 1 else self.store

    @property
    def bad(self) -> bool:
        return self.status != "ok" or self.keeps_up.startswith("0/")


COLUMNS = tuple(f.name for f in fields(ReplayRow) if BESIDE not in f.metadata)  # replay.csv's, in order


def machine_limits(record) -> Mapping:
    """The machine limits a replay cell's rate is a share of, as the family's before_sweep measured them
    into env.json (RunRecord.measured["limits"]); {} when none were."""
    return record.measured.get("limits") or {}


def replay_rows(results) -> list:
    """One ReplayRow per replay cell, in the run's order."""
    out = []
    kept = _kept_up_counts(results)
    for c in results.cells.values():
        if c.kind != "replay":
            continue
        p, s = c.part("replay"), c.steps_per_s
        mode = c.env_kwargs.get("mode", KWARGS["mode"])
        item, gbps = p.item_bytes, p.limit_gbps
        repeats = tuple(run.steps_per_s * item / 1e6 for run in results.benchmarks[c.cell_id].ok_runs
                        if item and is_num(run.steps_per_s))
        _, frac_low, frac_high = (median_ci([mb / (gbps * 1e3) for mb in repeats])
                                  if is_num(p.limit_frac) and gbps else (None, None, None))
        out.append(ReplayRow(
            workload=c.env[len(PREFIX):], mode=mode, store=store_label(c), actors=c.num_envs,
            item_bytes=item, capacity_items=p.capacity_items, capacity_scale=p.capacity_scale,
            page_cache=p.page_cache or "", n=c.n, status=c.status,
            items_per_s=s.median, mb_per_s=_mb_per_s(s.median, item),
            add_items_per_s=c.stat("add_items_per_s").median,
            sample_items_per_s=c.stat("sample_items_per_s").median,
            bound=p.bound or "", limit_gbps=gbps, limit_frac=p.limit_frac,
            limit_frac_ci_low=frac_low, limit_frac_ci_high=frac_high,
            sample_latency_p99_ms=c.stat("sample_latency_p99_ms").median,
            sample_latency_p999_ms=c.stat("sample_latency_p999_ms").median,
            add_latency_p99_ms=c.stat("add_latency_p99_ms").median,
            keeps_up=kept.get(c.cell_id, "") if mode == "target" else "",
            sample_lag_max_ms=c.stat("sample_lag_max_ms").maximum,
            add_lag_max_ms=c.stat("add_lag_max_ms").maximum, max_reuse=p.max_reuse,
            reuse_mean=c.stat("reuse_mean").median, reuse_max=c.stat("reuse_max").maximum, error=c.error,
            adapter=c.adapter, cell_id=c.cell_id, cv=s.cv, mb_per_s_repeats=repeats,
            mb_per_s_ci_low=_mb_per_s(s.ci_low, item), mb_per_s_ci_high=_mb_per_s(s.ci_high, item)))
    return out


def _mb_per_s(items_per_s, item_bytes):
    return items_per_s * item_bytes / 1e6 if item_bytes and is_num(items_per_s) else None


def store_label(cell) -> str:
    opts = kv_label(cell.options)
    return cell.adapter + (f" ({opts})" if opts else "")


def _kept_up_counts(results) -> dict:
    out = {}
    for cell_id, bench in results.benchmarks.items():
        flags = [r.get("keeps_up") for r in bench.ok_runs if r.get("keeps_up") is not None]
        if flags:
            out[cell_id] = f"{sum(1 for f in flags if f >= 1)}/{len(flags)}"
    return out


@dataclass(frozen=True)
class Target:
    """One of the issue's targets as this run met it: the ratio with its bootstrap 95% CI and the verdict."""
    target: str
    ours: str                   # our store it is about
    figure: str                 # the rates compared, in words
    ratio: float
    ratio_ci_low: Optional[float]
    ratio_ci_high: Optional[float]
    met: bool


def targets(rows) -> list:
    """The issue's targets, from this run: our fastest store vs the fastest of sb3/tianshou/torchrl per
    workload (max-sample), and the shared-memory ring's share of single-core memcpy on 10 MB items; each
    ratio with its bootstrap 95% CI (the first of both stores' repeats, rlbench.results.stats.ratio_ci; the
    second limit_frac's)."""
    out = []
    sampled = [r for r in rows if r.mode == "max-sample" and is_num(r.mb_per_s) and r.n]
    for workload in WORKLOADS:
        at = [r for r in sampled if r.workload == workload]
        ours = max((r for r in at if r.adapter in OURS), key=lambda r: r.mb_per_s, default=None)
        peer = max((r for r in at if r.adapter in PEERS), key=lambda r: r.mb_per_s, default=None)
        if ours and peer:
            ratio = ours.mb_per_s / peer.mb_per_s
            _, low, high = ratio_ci(ours.mb_per_s_repeats, peer.mb_per_s_repeats)
            out.append(Target(f"{workload}: our fastest >= fastest peer", ours.store,
                              f"{mb(ours.mb_per_s)} vs {mb(peer.mb_per_s)} MB/s ({peer.store})", ratio, low, high,
                              ratio >= 1.0))
    for r in sampled:
        if r.adapter == "shm-ring" and (r.item_bytes or 0) >= 10_000_000 and is_num(r.limit_frac) \
                and r.bound == "memcpy_1core":
            out.append(Target(f"{r.workload}: shm-ring sample bandwidth >= 0.7 x memcpy (1 core)", r.store,
                              f"{mb(r.mb_per_s)} MB/s vs {mb(r.limit_gbps * 1000)} MB/s", r.limit_frac,
                              r.limit_frac_ci_low, r.limit_frac_ci_high, r.limit_frac >= 0.7))
    return out


def mb(v) -> str:
    """MB/s as the targets read them: 12,345."""
    return fixed(v, ",.0f")


def replay_csv(results) -> dict:
    rows = replay_rows(results)
    return {"replay.csv": to_csv([asdict(r) for r in rows], COLUMNS)} if rows else {}


# -- HTML ------------------------------------------------------------------------------------------

def replay_section(results) -> str:
    rows = replay_rows(results)
    if not rows:
        return ""
    limits = machine_limits(results.record)
    parts = ["<h2>Replay and storage: the survey's workloads</h2>",
             "<p>Each store held the workload's items (capacity scaled to the run's memory budget, as recorded) "
             "and was filled, every page touched, before timing. <i>max-sample</i>: the learner samples "
             "batches as fast as it can and reads every byte; <i>max-add</i>: actors add as fast as they can; "
             "<i>max-both</i>: both at once; <i>target</i>: adds and samples on the workload's schedule, latency "
             "counted from each op's scheduled start. Fraction = MB/s over the machine limit named in "
             "<i>bound</i>, measured in this run, with the bootstrap 95% CI of the median of the repeats' "
             "fractions; a target's ratio has the bootstrap 95% CI from both sides' repeats.</p>",
             _limits_table(limits)]
    met = targets(rows)
    if met:
        parts += ["<h3>Targets</h3>", _targets_table(met)]
    parts += ["<h3>Sample bandwidth vs item size (max-sample)</h3>",
              bandwidth_chart(rows, limits, charts.chart_id("replay", "bandwidth"))]
    for workload in WORKLOADS:
        at = [r for r in rows if r.workload == workload]
        if at:
            w = WORKLOADS[workload]
            parts.append(f"<h3>{esc(workload)}: {esc(w.algorithm)} on {esc(w.env)}, {w.sampling}, items of "
                         f"{grouped(at[0].item_bytes)} bytes, {fixed(w.add_per_s, 'g')} adds/s and "
                         f"{fixed(w.sample_per_s, 'g')} samples/s in batches of {w.batch_size}</h3>")
            parts.append(_survey_rates(workload))
            parts.append(_workload_table(at))
    return "".join(parts)


def _survey_rates(workload: str) -> str:
    """The workload's rates in MB/s at the survey's item size, as items/s x item size; where the survey's own
    MB/s column disagrees, a footnote says so (rlbench.families.replay.driver.stated_checks)."""
    said = []
    for c in (c for c in stated_checks() if c.workload == workload):
        text = (f"{c.side}: {fixed(c.items_per_s, 'g')} items/s x {size(c.item_bytes)} = "
                f"{fixed(c.implied_mb_per_s, '.3g')} MB/s")
        if not c.consistent:
            text += (f"<sup>*</sup> <small>(* the survey's table says {fixed(c.stated_mb_per_s, 'g')} MB/s, which "
                     "its own items/s and item size do not give; rlbench uses items/s x item size)</small>")
        said.append(text)
    return f"<p>The survey's rates: {'; '.join(said)}.</p>"


def _limits_table(limits) -> str:
    if not limits:
        return "<p>No machine limits were measured in this run.</p>"
    if "error" in limits:
        return f"<p class='warn'>Machine limits could not be measured: {esc(limits['error'])}</p>"
    cells = []
    for key, label, _ in LIMIT_LINES + (("disk_seq_read_gbps", "disk, sequential reads (cold)", ""),
                                        ("disk_random_read_4k_gbps", "disk, random 4 KiB reads (cold)", "")):
        fig = limits.get(key)
        if isinstance(fig, dict):
            cells.append(f"<tr><td>{esc(label)}</td><td>{fixed(fig['median'], '.3g')} GB/s</td></tr>")
    where = f"{limits.get('disk_path', '?')} ({limits.get('fs_type', '?')}); page cache {limits.get('page_cache', '?')}"
    return (f"<table class='meta'><tr><th>machine limit</th><th>median</th></tr>{''.join(cells)}</table>"
            f"<p><small>disk: {esc(where)}</small></p>")


def _ratio(t: Target) -> str:
    return esc(with_ci(t.ratio, t.ratio_ci_low, t.ratio_ci_high))


TARGET_COLUMNS = (Column("target", lambda t: t.target), Column("our store", lambda t: t.ours),
                  Column("figure", lambda t: t.figure), Column("ratio [95% CI]", lambda t: t.ratio, html=_ratio),
                  Column("verdict", lambda t: "met" if t.met else "missed"))


def _targets_table(rows) -> str:
    return table(TARGET_COLUMNS, rows, bad_if(lambda t: not t.met))


SAMPLE_P99 = figure("sample_latency_p99_ms", "sample p99 ms", grouped)  # registered figures: their label and format
ADD_P99 = figure("add_latency_p99_ms", "add p99 ms", grouped)


def _fraction(r: ReplayRow) -> str:
    return esc(with_ci(r.limit_frac, r.limit_frac_ci_low, r.limit_frac_ci_high, fmt=pct))


def _lags(r: ReplayRow) -> str:
    """Target mode: the most a repeat's sample and add schedules fell behind; '' for other modes (or rows from
    before lags were recorded)."""
    if not (is_num(r.sample_lag_max_ms) or is_num(r.add_lag_max_ms)):
        return ""
    return f"{fixed(r.sample_lag_max_ms, ',.1f')} / {fixed(r.add_lag_max_ms, ',.1f')}"


def _reuse(r: ReplayRow) -> str:
    """Samples per item (mean, the most of any item; medians and the worst over repeats) and the bound."""
    if not is_num(r.reuse_mean):
        return ""
    bound = f" ({r.max_reuse})" if r.max_reuse else ""
    return f"{fixed(r.reuse_mean, '.3g')} / {fixed(r.reuse_max, ',.0f')}{bound}"


def _capacity(r: ReplayRow) -> str:
    return f"{grouped(r.capacity_items)} ({fixed(r.capacity_scale, '.3g')})" if is_num(r.capacity_scale) else "-"


def _status(r: ReplayRow) -> str:
    return esc(r.status) + (f"<br><small>{esc(r.error)}</small>" if r.error else "")


WORKLOAD_COLUMNS = (
    Column("store", lambda r: r.store), Column("mode", lambda r: r.mode), Column("actors", lambda r: r.actors),
    Column("items/s", lambda r: r.items_per_s, grouped), Column("MB/s", lambda r: r.mb_per_s, grouped),
    Column("bound", lambda r: r.bound), Column("fraction [95% CI]", lambda r: r.limit_frac, html=_fraction),
    Column(SAMPLE_P99[0], lambda r: r.sample_latency_p99_ms, SAMPLE_P99[1]),
    Column(ADD_P99[0], lambda r: r.add_latency_p99_ms, ADD_P99[1]), Column("keeps up", lambda r: r.keeps_up),
    Column("lag max ms (sample / add)", lambda r: r.worst_lag, html=_lags),
    Column("reuse mean / max (bound)", lambda r: r.reuse_max, html=_reuse),
    Column("capacity (scale)", lambda r: r.capacity_items, html=_capacity),
    Column("page cache", lambda r: r.page_cache), Column("status", lambda r: r.status, html=_status))


def _workload_table(rows) -> str:
    ordered = sorted(rows, key=lambda r: (r.mode, -(r.mb_per_s or 0)))
    return table(WORKLOAD_COLUMNS, ordered, bad_if(lambda r: r.bad))


def bandwidth_figure(rows, limits):
    """Sampled MB/s vs item bytes, log-log, one line per store (and actor count) with its 95% CI, the
    machine limits as dashed lines; None without a max-sample cell."""
    ok = [{"item_bytes": r.item_bytes, "mb_per_s": r.mb_per_s, "series": r.series, "n": r.n, "cv": r.cv,
           "mb_per_s_ci_low": r.mb_per_s_ci_low, "mb_per_s_ci_high": r.mb_per_s_ci_high,
           "label": f"{r.workload}: {r.cell_id}"}
          for r in rows if r.mode == "max-sample" and is_num(r.mb_per_s) and r.mb_per_s > 0]
    if not ok:
        return None
    lines = [(f"{label}: {mb(limits[k]['median'] * 1000)} MB/s", limits[k]["median"] * 1000, colour)
             for k, label, colour in LIMIT_LINES if isinstance(limits.get(k), dict) and is_num(limits[k].get("median"))]
    return charts.scaling(ok, x="item_bytes", y="mb_per_s", series="series", lo="mb_per_s_ci_low",
                          hi="mb_per_s_ci_high", n="n", cv="cv", label="label", x_title="item size",
                          y_title="sampled MB/s", x_fmt=size, y_fmt=lambda v: f"{grouped(v)} MB/s", hlines=lines,
                          height=460)


def bandwidth_chart(rows, limits, div_id: str = "chart-replay-bandwidth") -> str:
    fig = bandwidth_figure(rows, limits)
    return charts.to_html(fig, div_id) if fig else "<p>No max-sample cells in this run.</p>"
