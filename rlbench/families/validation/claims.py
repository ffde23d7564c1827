"""The claims matrix: every headline of the source articles (docs/published.md) as a check with a verdict on the
machine at hand. A claim names the cells that test it and the rule; judged over one or more runs of one machine,
its verdict is one of:

- `reproduced`: the rule holds on the cells measured here (within the stated tolerance), over the whole 95% CI of
  each ratio it reads;
- `not reproduced`: it does not, over the whole CI of a ratio; the measured value is given, and why where known;
- `inconclusive`: a ratio's CI reaches both sides of the rule (or has fewer than 2 repeats a side): the run's
  noise could flip the verdict, so it is none, with the repeats that would likely decide it;
- `not comparable here`: the claim needs hardware this machine lacks (GPUs, hundreds of cores, memory);
- `not measured`: the machine could test it, but the runs given hold no cell for it (which suite has them);
- `no rule`: no rule is written for it yet (what one would measure is said), whatever the machine.

Ratios are measured inside one run (a ratio whose two sides only runs apart hold is `not measured`), with the
bootstrap 95% CI of rlbench.results.stats.ratio_ci, widened by the machine's run-to-run noise where A/A runs give
it (`rlbench validate --noise-from`; rlbench.results.stats.widened): a verdict must hold across runs. Where
rlbench compares two of its own implementations (its PureJaxRL-style PPO against its CleanRL-style PPO), `own`
says so. A claim as published is a `Claim`; judged, it is a `JudgedClaim`, the matrix's row (claims.csv,
claims.md, the report's table).
"""
import math
from collections import Counter
from dataclasses import dataclass, field, replace

from rlbench.families.validation import checks
from rlbench.report.format import fixed
from rlbench.results.stats import median_ci, ratio_ci, widened

REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE, NOT_MEASURED = ("reproduced", "not reproduced", "not comparable here",
                                                            "not measured")
INCONCLUSIVE = "inconclusive"
NO_RULE = "no rule"
COLUMNS = ("claim", "source", "says", "published", "rule", "verdict", "measured", "why", "cells", "needs", "own")
OWN = "rlbench's own implementations"


@dataclass(frozen=True)
class Needs:
    """The hardware a claim needs to be tested at all."""
    what: str
    cores: int = 0
    gpus: int = 0
    ram_gb: float = 0

    def lacking(self, machine: dict) -> str:
        """'' when the machine has it, else what it has instead."""
        cores, gpus = machine.get("cpu_logical_cores") or 0, len(machine.get("gpus") or [])
        ram = machine.get("ram_gb") or 0
        if cores >= self.cores and gpus >= self.gpus and ram >= self.ram_gb:
            return ""
        return f"this machine: {cores} cores, {gpus or 'no'} GPU{'s' if gpus > 1 else ''}, {ram:.0f} GB of memory"


@dataclass(frozen=True)
class Measured:
    """What a rule found: whether the claim holds (on the medians), the text shown, the cells used, why not, the
    ratios it measured, each (median ratio, CI low, CI high), and `open`: why the CIs do not settle it ('' where
    they do: every ratio's CI on one side of its rule, or one wholly against it)."""
    holds: bool
    text: str
    cells: tuple = ()
    why: str = ""
    ratios: tuple = ()
    open: str = ""
    apart: str = ""      # a ratio's two sides are only in different runs: not measured (Pair.apart)


GRID = 200   # points of a CI a rule is read at: a band narrower than the CI inside it is not missed


def side(rule, value: float, low: float, high: float) -> str:
    """Where a ratio's 95% CI lies against a rule (a predicate on the ratio holding on an interval, or beyond a
    bound): "in" wholly where it holds, "out" wholly where it does not, "open" across its edge or untested (a NaN
    bound: fewer than 2 repeats a side)."""
    if not (low == low and high == high):
        return "open"
    held = {bool(rule(low + (high - low) * i / GRID)) for i in range(GRID + 1)} | {bool(rule(value))}
    return "in" if held == {True} else "out" if held == {False} else "open"


def repeats_to_settle(rule, value: float, low: float, high: float, repeats: int, run_sd: float = 0.0):
    """About how many repeats a side would bring the CI off the rule's edge: the repeats' part of its half-width
    shrinks as 1/sqrt(n), the run-to-run part (1.96 sqrt(2) run_sd in log space, added in quadrature: `widened`)
    does not, and together they must come within the median's distance to the edge (found by bisection between
    the median and the CI's end across it). 0 where no edge lies within the CI; None where the run-to-run part
    alone reaches the edge (no number of repeats in one run settles it); at least 3 with no CI yet."""
    if not (low == low and high == high):
        return max(3, repeats + 1)
    end = next((e for e in (low, high) if bool(rule(e)) != bool(rule(value))), None)
    if end is None:
        return 0
    near, far = value, end
    for _ in range(40):
        mid = (near + far) / 2
        near, far = (mid, far) if bool(rule(mid)) == bool(rule(value)) else (near, mid)
    if near <= 0 or end <= 0 or value <= 0:
        return max(3, repeats + 1)
    gap, width = abs(math.log(near / value)), abs(math.log(end / value))
    floor = 1.959964 * math.sqrt(2) * run_sd
    if gap <= floor:
        return None
    own = max(width ** 2 - floor ** 2, 0.0)
    return max(repeats + 1, int(repeats * own / (gap ** 2 - floor ** 2)) + 1)


def settled(parts) -> str:
    """'' when the parts' sides settle the claim (one "out" decides against it; all "in" for it), else why not:
    the first open part's CI and the repeats that would likely settle it. parts: (label, side, repeats needed,
    (value, low, high))."""
    if any(s == "out" for _, s, _, _ in parts) or all(s == "in" for _, s, _, _ in parts):
        return ""
    label, _, need, (value, low, high) = next(p for p in parts if p[1] == "open")
    where = f"{label}: " if label else ""
    if not (low == low and high == high):
        return f"{where}{_ratio_text(value, low, high)} has no CI yet (fewer than 2 repeats a side): run it with " \
               f"--repeats {need} or more"
    if need is None:
        return (f"{where}the 95% CI of {_ratio_text(value, low, high)} reaches both sides of the rule, and the "
                "run-to-run noise alone reaches its edge: no number of repeats in one run would settle it")
    return (f"{where}the 95% CI of {_ratio_text(value, low, high)} reaches both sides of the rule: about {need} "
            "repeats a side would likely settle it")


@dataclass(frozen=True)
class Claim:
    id: str
    source: str
    says: str
    published: str
    rule: str
    judge: object = None          # (Evidence) -> Measured, or None when the runs hold no cell for it
    needs: Needs = None
    suite: str = "suites/validate.toml"   # where its cells are
    own: bool = False
    why_not: str = ""             # why it is not reproduced here, where known (shown with a `not reproduced`)


@dataclass(frozen=True)
class JudgedClaim:
    """A claim judged over one machine's runs: the matrix's row. What the claim says comes from its Claim; the
    verdict, the measured text (a ratio with its bootstrap 95% CI), the ratios themselves, the cells used and why
    from the judging. Typed fields, so the CSV, the Markdown page and the report's table read one value each and a
    misspelt column fails where it is read, not as an empty cell."""
    claim: str                    # the claim's id
    source: str
    says: str
    published: str
    rule: str
    verdict: str                  # REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_COMPARABLE, NOT_MEASURED, NO_RULE
    measured: str = ""            # what the rule found, as shown ('' where it was not judged)
    why: str = ""
    cells: tuple = ()             # the cell ids the rule used
    needs: str = ""               # the hardware it needs, where it needs some
    own: bool = False             # it compares two of rlbench's own implementations
    ratios: tuple = ()            # the ratios measured, each (median ratio, CI low, CI high)

    @property
    def own_note(self) -> str:
        """What claims.csv and the pages say of `own`."""
        return OWN if self.own else ""

    def record(self) -> dict:
        """claims.csv's row (COLUMNS): the cells joined by ' | ', `own` as its note."""
        return {"claim": self.claim, "source": self.source, "says": self.says, "published": self.published,
                "rule": self.rule, "verdict": self.verdict, "measured": self.measured, "why": self.why,
                "cells": " | ".join(self.cells), "needs": self.needs, "own": self.own_note}


@dataclass(frozen=True)
class Pair:
    """The two sides of a ratio, from one run (`run`: that run's Evidence); or, where no run holds both, `apart`:
    the runs they are in, said (the ratio is not taken: runs hours apart differ by more than a run's repeats)."""
    a: object = None
    b: object = None
    run: "Evidence" = None
    apart: str = ""


@dataclass
class Evidence:
    """The ok cells of the runs given (one machine), and each cell's repeats for the ratio CIs; `runs`, each run's
    own Evidence (a ratio's two sides come from one of them: `pair`), `label` the run's id."""
    cells: list
    repeats: dict = field(default_factory=dict)     # cell id -> {metric -> [values]}
    runs: list = field(default_factory=list)
    label: str = ""
    run_sd: float = 0.0     # the machine's run-to-run noise (rlbench.results.changes.Noise.sd), added to each CI

    @classmethod
    def of(cls, results_list, run_sd: float = 0.0) -> "Evidence":
        """The runs' evidence, a cell held by two of them taken from the first."""
        runs = [cls.of_run(results, i, run_sd) for i, results in enumerate(results_list)]
        cells, repeats = [], {}
        for run in runs:
            for cell in run.cells:
                if cell.cell_id not in repeats:
                    cells.append(cell)
                    repeats[cell.cell_id] = run.repeats[cell.cell_id]
        return cls(cells, repeats, runs, run_sd=run_sd)

    @classmethod
    def of_run(cls, results, index: int = 0, run_sd: float = 0.0) -> "Evidence":
        cells = checks._ok(list(results.cells.values()))
        label = (results.record.run_id if results.record is not None else "") or f"run {index + 1}"
        return cls(cells, {c.cell_id: results.benchmarks[c.cell_id] for c in cells}, label=label, run_sd=run_sd)

    def pair(self, pick) -> Pair:
        """A ratio's two sides from the first run that holds both (pick: Evidence -> (a, b), either None where
        that evidence lacks it); Pair() where no run and not the runs together hold them; `apart` where only the
        runs together do."""
        for run in self.runs or [self]:
            a, b = pick(run)
            if a and b:
                return Pair(a, b, run)
        a, b = pick(self)
        if not (a and b):
            return Pair()
        where = {run.label for run in self.runs for c in (a, b) if c.cell_id in run.repeats}
        return Pair(apart=f"{a.cell_id} and {b.cell_id} are in different runs ({', '.join(sorted(where))}): a "
                          "ratio's two sides come from one run")

    def values(self, cell, key) -> list:
        """A cell's `key` per ok repeat; `key` may be a function of a repeat's row (a figure derived per repeat,
        such as env steps per CPU-second)."""
        read = key if callable(key) else (lambda r: r.get(key))
        return [read(r) for r in self.repeats[cell.cell_id].ok_runs]

    def seeds(self, cell) -> int:
        """How many different seeds a cell's ok repeats ran (a run with --seeds gives each repeat its own)."""
        return len({r.get("seed") for r in self.repeats[cell.cell_id].ok_runs})

    def find(self, adapter: str, env: str, num_envs: int = None, policy: str = None, device: str = None,
             **options):
        """The first ok cell of `adapter` on `env` whose options (or env_kwargs) hold `options`; `policy` and
        `device` match the start of the cell's."""
        for c in self.cells:
            if c.adapter != adapter or c.env != env or (num_envs is not None and c.num_envs != num_envs):
                continue
            if policy is not None and not str(c.policy).startswith(policy):
                continue
            if device is not None and not str(c.device or "cpu").startswith(device):
                continue
            given = {**dict(c.env_kwargs or {}), **dict(c.options or {})}
            if c.workers is not None:
                given.setdefault("workers", c.workers)
            if all(given.get(k) == v for k, v in options.items()):
                return c
        return None

    def ratio(self, num, den, key: str = "steps_per_s") -> tuple:
        """(median ratio, CI low, CI high) of num's `key` over den's: the bootstrap CI of the run's repeats,
        widened by the run-to-run noise (rlbench.results.stats.widened)."""
        return widened(*ratio_ci(self.values(num, key), self.values(den, key)), self.run_sd)

    def median(self, cell, key) -> tuple:
        """(median, CI low, CI high) of one cell's `key` over its repeats, the bootstrap CI widened by one side's
        run-to-run noise (`widened` adds sqrt(2) run_sd for a ratio's two sides; one side moves by run_sd)."""
        return widened(*median_ci(self.values(cell, key)), self.run_sd / math.sqrt(2))

    def repeats_of(self, num, den, key: str = "steps_per_s") -> int:
        """The repeats the smaller side of a ratio has."""
        return min(len([v for v in self.values(c, key) if v is not None]) for c in (num, den))


def _ratio_text(value, low, high) -> str:
    ci = f" [{fixed(low, '.2f')}, {fixed(high, '.2f')}]" if low == low and high == high else ""
    return f"{fixed(value, '.2f')}x{ci}"


def _within(measured: float, published: float, tolerance: float) -> bool:
    return abs(measured / published - 1) <= tolerance


def envpool_ratio(num: str, den: str, workers: int, published: dict,
                  tolerance: float = checks.reference.RATIO_TOLERANCE):
    """A judge: EnvPool's table ratio num / den at `workers`, on Pong-v5 and Ant-v4, each within tolerance."""
    def judge(ev: Evidence):
        parts, used, ratios, holds, sides = [], [], [], True, []
        for env, pub in published.items():
            got = ev.pair(lambda e, env=env: (checks.best(e.cells, env, num, workers),
                                              checks.best(e.cells, env, den, workers)))
            if got.apart or not got.a:
                return Measured(False, "", apart=got.apart) if got.apart else None
            a, b = got.a, got.b
            value, low, high = got.run.ratio(a, b, "frames_per_s")
            rule = lambda r, pub=pub: _within(r, pub, tolerance)  # noqa: E731
            holds &= rule(value)
            parts.append(f"{env.split('-')[0]} {_ratio_text(value, low, high)}")
            used += [a.cell_id, b.cell_id]
            ratios.append((value, low, high))
            sides.append((env.split("-")[0], side(rule, value, low, high),
                          repeats_to_settle(rule, value, low, high, got.run.repeats_of(a, b, "frames_per_s"),
                                            got.run.run_sd),
                          (value, low, high)))
        return Measured(holds, "; ".join(parts), tuple(used), ratios=tuple(ratios), open=settled(sides))
    return judge


def _paired(ev: "Evidence", num: dict, den: dict):
    """(Pair, None) where one run holds both sides (each found by Evidence.find's arguments); else (None, what a
    judge returns: None where no run holds them, a Measured `apart` where only runs together do)."""
    got = ev.pair(lambda e: (e.find(**num), e.find(**den)))
    if got.apart:
        return None, Measured(False, "", apart=got.apart)
    return (got, None) if got.a else (None, None)


def pair_ratio(num: dict, den: dict, holds, key: str = "steps_per_s"):
    """A judge: one cell's `key` over another's (each found by Evidence.find's arguments); holds(ratio) -> bool."""
    def judge(ev: Evidence):
        got, absent = _paired(ev, num, den)
        if got is None:
            return absent
        a, b = got.a, got.b
        value, low, high = got.run.ratio(a, b, key)
        need = repeats_to_settle(holds, value, low, high, got.run.repeats_of(a, b, key), got.run.run_sd)
        return Measured(bool(holds(value)), _ratio_text(value, low, high), (a.cell_id, b.cell_id),
                        ratios=((value, low, high),), open=settled([("", side(holds, value, low, high), need,
                                                                      (value, low, high))]))
    return judge


def rates_sustained(workloads: tuple):
    """A judge: at each workload's own add and sample rates together (the replay family's target mode, a buffer
    beyond the cache), which stores kept up in every repeat (`keeps_up`: neither schedule fell behind at any
    point). The survey's claim (storage is becoming the bottleneck, which it marks as still to be tested) holds
    where no store keeps up with some workload; the stores' names and repeats are the evidence either way."""
    def judge(ev: Evidence):
        parts, used, short = [], [], False
        for env in workloads:
            stores = [c for c in ev.cells if c.env == env and c.kind == "replay" and c.num_envs == 1
                      and (c.env_kwargs or {}).get("mode") == "target"
                      and (c.env_kwargs or {}).get("max_mb", 0) >= BEYOND_CACHE_MB
                      and not (c.options or {}).get("rate_limiter")]
            if not stores:
                return None
            flags = {c.cell_id: [v for v in ev.values(c, "keeps_up") if v is not None] for c in stores}
            kept = [c for c in stores if flags[c.cell_id] and all(flags[c.cell_id])]
            behind = [c for c in stores if c not in kept]
            short |= not kept
            def said(group, flags=flags):   # each store with the repeats it kept up in, of those it ran
                return ", ".join(f"{c.adapter}{' (cold cache)' if (c.options or {}).get('cache') == 'cold' else ''} "
                                 f"{sum(map(bool, flags[c.cell_id]))}/{len(flags[c.cell_id])}" for c in group)
            parts.append(f"{env.split('/')[1]}: {len(kept)} of {len(stores)} stores keep up"
                         + (f" ({said(kept)})" if kept else "") + (f"; behind: {said(behind)}" if behind else ""))
            used += [c.cell_id for c in stores]
        return Measured(short, "; ".join(parts), tuple(used),
                        "" if short else "in-memory stores sustain the survey's add and sample rates together at "
                                         "buffers of 1-2 GB; its concern is full-size buffers (100-300 GB) and many "
                                         "learners, which this machine cannot hold")
    return judge


def reuse_held(bounds: dict):
    """A judge: the survey says PPO's and IMPALA's items must be sampled a bounded number of times, the bound its
    rates imply (replay/NAME -> max_reuse). The claim holds where sampling at the survey's rates without a bound
    (max_reuse -1) serves some item past that bound: the bound is needed. Whether rlbench's stores enforce it
    (their reuse_max at the bound) is shown beside, a property of the stores, not of the claim."""
    def judge(ev: Evidence):
        parts, used, holds = [], [], True
        for env, bound in bounds.items():
            def most(c):
                return max(v for v in ev.values(c, "reuse_max") if v is not None)
            mine = [c for c in ev.cells if c.env == env and (c.env_kwargs or {}).get("mode") == "target"]
            bounded = [c for c in mine if (c.env_kwargs or {}).get("max_reuse") == bound]
            free = [c for c in mine if (c.env_kwargs or {}).get("max_reuse") == -1]
            if not free:
                return None
            passed = max(most(c) for c in free)
            holds &= passed > bound
            parts.append(f"{env.split('/')[1]} bound {bound}: unbounded up to {passed:.0f}"
                         + (" (enforcing it: " + ", ".join(f"{c.adapter} {most(c):.0f}" for c in bounded) + ")"
                            if bounded else ""))
            used += [c.cell_id for c in free + bounded]
        return Measured(holds, "; ".join(parts), tuple(used),
                        "" if holds else "sampled at the survey's rates without a bound, no item went past the bound "
                                         "its rates imply: here the bound was not needed")
    return judge


def per_cpu_second(row):
    """A repeat's env steps per CPU-second its processes used (steps/s over the cores busy on average): what the
    machine's cores bought, the utilisation a strategy makes of them."""
    steps, cpu = row.get("steps_per_s"), row.get("cpu_util")
    return steps / cpu if steps and cpu else None


def _finite(values) -> int:
    return sum(1 for v in values if v is not None and v == v)


def compile_in(judge, num: dict, den: dict, run_steps: float = 500_000):
    """A judge as `judge`, its text followed by the same ratio with the JIT compile counted in: each repeat's rate
    over one training run of `run_steps` env steps (the recipe's length), compile_s added to its time (0 for a side
    that compiles nothing). Where a source does not say whether its clock held the compile, both are shown."""
    def rate(row):
        steps = row.get("steps_per_s")
        return run_steps / ((row.get("compile_s") or 0.0) + run_steps / steps) if steps else None

    def judged(ev: Evidence):
        got = judge(ev)
        pair, _ = _paired(ev, num, den)
        if got is None or pair is None:
            return got
        value, low, high = pair.run.ratio(pair.a, pair.b, rate)
        return replace(got, text=f"{got.text} (compile in, over a {run_steps / 1e3:.0f}k-step run: "
                                 f"{_ratio_text(value, low, high)})")
    return judged


def over_seeds(num: dict, den: dict, holds, key: str = "steps_to_target"):
    """A judge of learning, not speed: num's `key` over den's with each repeat its own seed (`rlbench run --seeds`,
    a sweep's seed_per_repeat), the CI over seeds. Repeats of one seed redraw one learning curve, which says
    nothing of how seeds spread, so a side with fewer than 2 seeds leaves the claim open."""
    def judge(ev: Evidence):
        got, absent = _paired(ev, num, den)
        if got is None:
            return absent
        a, b, run = got.a, got.b, got.run
        value, low, high = run.ratio(a, b, key)
        reached = ", ".join(f"{c.adapter} {_finite(run.values(c, key))} of {len(run.values(c, key))} repeats, "
                            f"{run.seeds(c)} seed{'s' if run.seeds(c) > 1 else ''}" for c in (a, b))
        text = f"{_ratio_text(value, low, high)} (reached the target: {reached})"
        if min(run.seeds(a), run.seeds(b)) < 2:
            why = ("each side ran one seed (every repeat the suite's): one draw of a learning curve says nothing of "
                   "the spread over seeds; run its cells with --seeds 5")
        else:
            need = repeats_to_settle(holds, value, low, high, min(run.seeds(a), run.seeds(b)), run.run_sd)
            why = settled([("", side(holds, value, low, high), need, (value, low, high))])
        return Measured(value == value and bool(holds(value)), text, (a.cell_id, b.cell_id),
                        ratios=((value, low, high),), open=why)
    return judge


def cell_bound(pick, key, holds, show):
    """A judge of one cell's figure against a bound: pick(Evidence) -> the cell (None: not measured); its median
    over the repeats with the bootstrap CI, widened by one side's run-to-run noise; holds(value) -> bool, show
    formats a value."""
    def judge(ev: Evidence):
        cell = pick(ev)
        if cell is None:
            return None
        value, low, high = ev.median(cell, key)
        need = repeats_to_settle(holds, value, low, high, _finite(ev.values(cell, key)), ev.run_sd / math.sqrt(2))
        ci = f" [{show(low)}, {show(high)}]" if low == low and high == high else ""
        return Measured(bool(holds(value)), f"{show(value)}{ci}", (cell.cell_id,), ratios=((value, low, high),),
                        open=settled([("", side(holds, value, low, high), need, (value, low, high))]))
    return judge


def _in_memory_target(ev: Evidence, env: str, stores=("numpy-ring", "shm-ring")):
    """The first in-memory store's cell of a workload at its own rates (target mode, a buffer beyond the cache),
    with the machine limit its traffic is measured against."""
    return next((c for s in stores for c in ev.cells if c.adapter == s and c.env == env and c.num_envs == 1
                 and (c.env_kwargs or {}).get("mode") == "target"
                 and (c.env_kwargs or {}).get("max_mb", 0) >= BEYOND_CACHE_MB and c.value("limit_gbps")), None)


def bandwidth_share(workloads: tuple, at_most: float = 0.5):
    """A judge: at each workload's own add and sample rates, the share of the machine's memory-copy bandwidth
    (the limit the run measured, rlbench.machine.limits) that a store's traffic, add + sample MB/s per repeat,
    takes. The survey's "storage resources are poorly utilised" (its "to be tested") holds where every workload's
    share stays under `at_most` over its whole CI."""
    def judge(ev: Evidence):
        parts, used, ratios, sides, holds = [], [], [], [], True
        for env in workloads:
            cell = _in_memory_target(ev, env)
            if cell is None:
                return None
            limit = cell.value("limit_gbps")
            def share(row, limit=limit):
                return ((row.get("add_mb_per_s") or 0) + (row.get("sample_mb_per_s") or 0)) / (limit * 1e3)
            value, low, high = ev.median(cell, share)
            rule = lambda x: x < at_most  # noqa: E731
            holds &= rule(value)
            name = env.split("/")[1]
            parts.append(f"{name} {cell.adapter} {value:.1%}" + (f" [{low:.1%}, {high:.1%}]" if low == low else "")
                         + f" of {limit:.1f} GB/s")
            used.append(cell.cell_id)
            ratios.append((value, low, high))
            sides.append((name, side(rule, value, low, high),
                          repeats_to_settle(rule, value, low, high, _finite(ev.values(cell, share)),
                                            ev.run_sd / math.sqrt(2)),
                          (value, low, high)))
        return Measured(holds, "; ".join(parts), tuple(used), ratios=tuple(ratios), open=settled(sides))
    return judge


PHYSICS_ON_GPU = ("mjx", "brax", "mujoco-warp", "playground")


def fastest_gpu_physics(ev: Evidence):
    """The fastest cell of a GPU physics simulator (MJX, Brax, MuJoCo Warp, MuJoCo Playground) on the GPU."""
    cells = [c for c in ev.cells if c.adapter in PHYSICS_ON_GPU and str(c.device or "").startswith(("gpu", "cuda"))]
    return max(cells, key=lambda c: c.steps_per_s.median, default=None)


SURVEY_WORKLOADS = ("replay/IMPALA-Qbert", "replay/R2D2-Qbert", "replay/DQN-Qbert")   # its most demanding learners
PUREJAXRL_4 = dict(adapter="purejaxrl-ppo", env="CartPole-v1", num_envs=4)
CLEANRL_4 = dict(adapter="cleanrl-ppo", env="CartPole-v1", num_envs=4, vec="dummy")
GPU = Needs("a GPU", gpus=1)
BEYOND_CACHE_MB = 256      # a buffer this large is served from memory, not from the last-level cache
PONG_ANT = ("Pong-v5", "Ant-v4")


def _pub(pong, ant) -> dict:
    return dict(zip(PONG_ANT, (pong, ant)))


CLAIMS = (
    Claim("envpool-async-3x", "EnvPool (arXiv 2206.10558), benchmark table",
          "EnvPool runs about 3x Python subprocess vector envs on a laptop",
          "async / subprocess at 2 workers: Pong 2.60, Ant 2.78",
          "envpool-async (best over num_envs 2.5-4 x batch 2) over gymnasium-async at 2 envs, frames/s, each within "
          "25% (the spread between EnvPool's own two machines)",
          envpool_ratio("envpool-async", "subprocess", 2, _pub(2.60, 2.78)), Needs("2 cores", cores=2)),
    Claim("envpool-sync-2x", "EnvPool benchmark table", "EnvPool's synchronous step doubles subprocesses",
          "sync / subprocess at 2 workers: Pong 2.01, Ant 2.05",
          "envpool-sync over gymnasium-async at 2 envs, frames/s, each within 25%",
          envpool_ratio("envpool-sync", "subprocess", 2, _pub(2.01, 2.05)), Needs("2 cores", cores=2)),
    Claim("envpool-async-over-sync", "EnvPool benchmark table", "async stepping beats sync by about a third",
          "async / sync at 2 workers: Pong 1.29, Ant 1.36",
          "envpool-async (best) over envpool-sync at 2 workers, frames/s, each within 25%",
          envpool_ratio("envpool-async", "envpool-sync", 2, _pub(1.29, 1.36)), Needs("2 cores", cores=2)),
    Claim("envpool-single-env", "EnvPool benchmark table", "one EnvPool env beats one gym env",
          "EnvPool sync / for-loop with 1 env: Pong 1.61, Ant 1.27",
          "envpool-sync over serial at 1 env, frames/s, each within 25%",
          envpool_ratio("envpool-sync", "for-loop", 1, _pub(1.61, 1.27))),
    Claim("envpool-over-sample-factory", "EnvPool article / benchmark table", "EnvPool is about twice as fast as "
          "Sample Factory, the fastest asynchronous CPU simulator before it", "~2x on the DGX-A100 (256 threads); the "
          "laptop table at 2 workers: async / Sample Factory on Pong 1.69",
          "envpool-async (best over num_envs 2.5-4 x batch 2) over sample-factory with 2 rollout workers (one env "
          "each, as EnvPool ran it) on Pong-v5, frames/s, within 25% of the table's 1.69 (the 2x is at 256 threads: "
          "envpool-dgx)", envpool_ratio("envpool-async", "sample-factory", 2, {"Pong-v5": 18880.65 / 11148.0}),
          Needs("2 cores", cores=2)),
    Claim("envpool-many-envs", "EnvPool article", "past about 32 envs Python subprocesses fall far behind",
          "qualitative (the paper's scaling figures: EnvPool several times subprocesses at 64+ envs)",
          "envpool-sync over gymnasium-async on CartPole-v1 at 64 envs >= 2, on a machine with a core for each of "
          "32 subprocesses (on fewer, 64 subprocesses share a few cores long before 32 envs: the rule could not fail)",
          pair_ratio(dict(adapter="envpool-sync", env="CartPole-v1", num_envs=64, policy="random"),
                     dict(adapter="gymnasium-async", env="CartPole-v1", num_envs=64, policy="random"),
                     lambda r: r >= 2),
          Needs("32 cores (a subprocess per env up to 32 envs, the scale the claim speaks of)", cores=32)),
    Claim("envpool-dgx", "EnvPool article / paper", "on a DGX-A100 EnvPool steps 1M Atari and 3M MuJoCo frames/s",
          "1,069,922 Atari and 3,134,287 MuJoCo frames/s on 256 threads; ~20x subprocesses, ~2x Sample Factory",
          "EnvPool's rate at 256 threads", needs=Needs("256 CPU threads (a DGX-A100)", cores=256)),
    Claim("envpool-cleanrl-3x", "EnvPool article", "swapping subprocess vector envs for EnvPool makes CleanRL's "
          "Atari PPO about 3x faster end to end", "~3x (Atari, PPO, a GPU learner)",
          "cleanrl-ppo on Pong-v5 (8 envs, the CNN on the GPU) with vec=envpool over vec=subproc, env steps/s, within "
          "25% of 3", pair_ratio(dict(adapter="cleanrl-ppo", env="Pong-v5", num_envs=8, device="cuda", vec="envpool"),
                                 dict(adapter="cleanrl-ppo", env="Pong-v5", num_envs=8, device="cuda", vec="subproc"),
                                 lambda r: _within(r, 3.0, 0.25)),
          needs=Needs("a GPU for the CNN learner (on 2 CPU cores the update sets the pace: reports/reference/*/train)",
                      gpus=1), suite="suites/train.toml with policy=mlp:device=cuda"),
    Claim("envpool-rl-games", "EnvPool article", "with rl_games on a laptop: Pong solved in ~5 min (Ray ~15), Ant "
          "past 5,000 in < 5 min", "Pong ~5 min vs ~15; Ant > 5,000 in < 5 min; rerun: 2 min 17 s and 2 min 36 s",
          "time to the return with EnvPool", needs=GPU, suite="(rl_games: not an rlbench adapter)"),
    Claim("ray-low-utilisation", "EnvPool article", "distributed solutions such as Ray, tested, use the machine's "
          "compute poorly", "qualitative (against EnvPool on the same machine)",
          "ray-actors (2 actors, synchronous, observations inline) over envpool-sync on CartPole-v1 at 8 envs, env "
          "steps per CPU-second its processes used (steps/s over cpu_util) <= 0.5",
          pair_ratio(dict(adapter="ray-actors", env="CartPole-v1", num_envs=8, policy="random", actors=2, mode="sync",
                          transport="inline"),
                     dict(adapter="envpool-sync", env="CartPole-v1", num_envs=8, policy="random"),
                     lambda r: r <= 0.5, per_cpu_second), Needs("2 cores", cores=2)),
    Claim("gpu-sim-10m-fps", "EnvPool article", "GPU simulators (Brax, Isaac Gym) reach ten million FPS, for the "
          "envs that can be rewritten in CUDA", "~10,000,000 FPS",
          "the fastest GPU physics cell (MJX, Brax, MuJoCo Warp, Playground on the GPU), env steps/s >= 10M (no "
          "frame skip counted; JIT compile out)", cell_bound(fastest_gpu_physics, "steps_per_s", lambda v: v >= 1e7,
                                            lambda v: f"{v / 1e6:.3g}M steps/s"),
          needs=GPU, suite="suites/device/gpu-physics.toml and gpu-warp.toml"),
    Claim("gymnax-cpu-107x", "gymnax README", "gymnax on the CPU steps CartPole about 100x numpy subprocesses",
          "46 s vs 0.43 s per 1M steps at 10 envs: 107x",
          "gymnax (CPU) over gymnasium-async at 10 envs, steps/s, within a factor of 2; JIT compile out (the README "
          "times the compiled step)",
          pair_ratio(dict(adapter="gymnax", env="CartPole-v1", num_envs=10, device="cpu", policy="random"),
                     dict(adapter="gymnasium-async", env="CartPole-v1", num_envs=10, policy="random"),
                     lambda r: 107 / 2 <= r <= 107 * 2)),
    Claim("gymnax-a100-1000x", "gymnax README / PureJaxRL article", "on an A100 gymnax steps 1M CartPole steps in "
          "0.05 s at 2k envs, 1000x numpy", "0.05 s per 1M steps (not blocked on the device)",
          "gymnax on the GPU at 2,048 envs: s per 1M steps <= 0.05; JIT compile out (as the README timed it)",
          needs=GPU,
          judge=lambda ev: _seconds_per_1m(ev, "CartPole-v1", 0.05), suite="suites/device/gpu-jax.toml"),
    Claim("gymnax-minatar-breakout", "gymnax README / PureJaxRL article", "MinAtar Breakout: 50 s on the CPU, "
          "0.2 s with gymnax on an A100", "49.4 / 2.41 / 0.19 s per 1M steps",
          "gymnax Breakout-MinAtar on the GPU at 2,048 envs: s per 1M steps <= 0.19; JIT compile out", needs=GPU,
          judge=lambda ev: _seconds_per_1m(ev, "gymnax:make", 0.19, env_id="Breakout-MinAtar"),
          suite="suites/device/gpu-jax.toml"),
    Claim("purejaxrl-10x", "PureJaxRL (Lu et al. 2023)", "PPO compiled end to end in JAX runs more than 10x "
          "CleanRL's PyTorch PPO with the same envs and hyperparameters", "> 10x wall-clock (CartPole-v1, on a GPU)",
          "purejaxrl-ppo over cleanrl-ppo (SyncVectorEnv) on CartPole-v1 at 4 envs, env steps/s >= 10 (here on "
          "the CPU); JIT compile out, as the ratio of training rates (the article does not say whether its clock "
          "held the compile: the ratio with it in, over the recipe's 500k env steps, is shown beside)",
          compile_in(pair_ratio(PUREJAXRL_4, CLEANRL_4, lambda r: r >= 10), PUREJAXRL_4, CLEANRL_4), own=True),
    Claim("purejaxrl-same-results", "PureJaxRL", "CleanRL's PPO and the JAX PPO, with the same hyperparameters and "
          "frames, give nearly the same results", "nearly the same learning curves (CartPole-v1, MinAtar Breakout, 5 "
          "seeds)", "purejaxrl-ppo over cleanrl-ppo (SyncVectorEnv) on CartPole-v1 at 4 envs, env steps to a mean "
          "return of 475, median over seeds (a repeat per seed), within a factor of 1.5 either way",
          over_seeds(PUREJAXRL_4, CLEANRL_4, lambda r: 1 / 1.5 <= r <= 1.5), own=True),
    Claim("purejaxrl-2048-agents", "PureJaxRL", "2,048 agents vmapped on one GPU train in half the time of one "
          "CleanRL agent (with the 10x, the title's 4000x)", "0.5x the time of one agent (CartPole-v1): 2,048 x 2 = "
          "4,096x its env steps/s",
          "purejaxrl-ppo with num_agents=2048 on the GPU over one cleanrl-ppo agent (4 envs, SyncVectorEnv) on the "
          "same machine, env steps/s >= 4,096; JIT compile out (reported apart)",
          pair_ratio(dict(adapter="purejaxrl-ppo", env="CartPole-v1", num_envs=4, device="gpu", num_agents=2048),
                     dict(adapter="cleanrl-ppo", env="CartPole-v1", num_envs=4, vec="dummy"), lambda r: r >= 4096),
          needs=GPU, own=True, suite="suites/device/gpu-jax.toml"),
    Claim("rlpyt-parallel-cpu", "rlpyt (arXiv 1909.01500)", "parallel CPU sampling, each worker with its own agent "
          "copy, multiplies collection speed", "qualitative (scales with cores)",
          "rlpyt-cpu with 2 workers over rlpyt-serial, 2 envs of a 1 ms step: parallel efficiency >= 0.8",
          pair_ratio(dict(adapter="rlpyt-cpu", env="rlbench/Synthetic-v0", num_envs=2, workers=2, policy="random",
                          step_cost_us=1000),
                     dict(adapter="rlpyt-serial", env="rlbench/Synthetic-v0", num_envs=2, policy="random",
                          step_cost_us=1000), lambda r: r / 2 >= 0.8),
          Needs("2 cores", cores=2), own=True),
    Claim("rlpyt-parallel-gpu", "rlpyt", "batching all workers' action selection on the GPU (the forward pass "
          "of the network) speeds up sampling", "qualitative",
          "rlpyt-gpu (the master's inference on cuda) over rlpyt-cpu (each worker's on its core), 8 workers, "
          "CartPole-v1 at 64 envs, a 64x64 MLP, env steps/s > 1",
          pair_ratio(dict(adapter="rlpyt-gpu", env="CartPole-v1", num_envs=64, device="cuda", workers=8,
                          policy="mlp64x64"),
                     dict(adapter="rlpyt-cpu", env="CartPole-v1", num_envs=64, workers=8, policy="mlp64x64"),
                     lambda r: r > 1),
          needs=Needs("a GPU and 8 cores for the workers", cores=8, gpus=1), suite="suites/device/gpu-torch.toml",
          own=True, why_not="a 64x64 MLP on CartPole's 4 numbers costs a worker's core less than the round trip "
                            "through the master and the GPU; the gain the article speaks of needs a network whose "
                            "forward pass outweighs that trip"),
    Claim("rlpyt-alternating", "rlpyt", "alternating two worker groups keeps the action-selecting master from "
          "going idle", "qualitative (the Alternating-GPU sampler beside Parallel-GPU)",
          "rlpyt-alternating over rlpyt-gpu (action selection in the master), 2 workers, CartPole-v1 at 8 envs, a "
          "64x64 MLP, env steps/s > 1",
          pair_ratio(dict(adapter="rlpyt-alternating", env="CartPole-v1", num_envs=8, workers=2, policy="mlp"),
                     dict(adapter="rlpyt-gpu", env="CartPole-v1", num_envs=8, workers=2, policy="mlp"),
                     lambda r: r > 1), Needs("2 cores", cores=2), own=True),
    Claim("rlpyt-r2d2-16k", "rlpyt", "rlpyt reproduces R2D2 at 16,000 samples/s on one workstation",
          "16,000 samples/s on 24 cores and 3 Titan Xp", "r2d2's samples/s at that size",
          needs=Needs("24 CPU cores and 3 GPUs", cores=24, gpus=3), suite="suites/learners.toml"),
    Claim("r2d2-paper-66k", "R2D2 (ICLR 2019), via rlpyt's article", "R2D2 ran at 66,000 steps/s",
          "66,000 on 256 CPUs and 1 GPU", "r2d2's steps/s at that size",
          needs=Needs("256 CPU cores and a GPU", cores=256, gpus=1), suite="suites/learners.toml"),
    Claim("sample-factory-100k", "Sample Factory (ICML 2020)", "more than 100,000 frames/s on one machine",
          "> 100k frames/s (frame skip 4), 36 cores and a GPU", "sample-factory's frames/s at that size",
          needs=Needs("36 cores and a GPU", cores=36, gpus=1)),
    Claim("impala-over-a3c", "distributed RL chapter (IMPALA, ICML 2018)", "IMPALA is a more efficient "
          "architecture than A3C", "qualitative", "impala (8 actors, the learner on the GPU) over a3c (8 workers) on "
          "CartPole-v1, 16 envs, samples/s > 1 (IMPALA's gain is a GPU learner batching many actors' trajectories; "
          "on 2 cores with a small MLP A3C's workers compute their gradients where they act: 0.79-0.84x, "
          "reports/reference/cpu-2core-*/learners)",
          pair_ratio(dict(adapter="impala", env="CartPole-v1", num_envs=16, device="cuda", workers=8),
                     dict(adapter="a3c", env="CartPole-v1", num_envs=16, workers=8), lambda r: r > 1,
                     "samples_per_s"),
          Needs("a GPU for the learner and 8 cores for the actors", cores=8, gpus=1), own=True,
          suite="suites/device/gpu-torch.toml"),
    Claim("a3c-parallel-workers", "distributed RL chapter (A3C, ICML 2016)", "A3C's workers, each acting in its own "
          "env and computing its own gradients, sample and update in parallel", "qualitative (scales with workers)",
          "a3c with 2 workers over 1, 4 envs each (CartPole-v1 at 8 and 4 envs, a 64x64 MLP), samples/s: parallel "
          "efficiency >= 0.8",
          pair_ratio(dict(adapter="a3c", env="CartPole-v1", num_envs=8, workers=2, policy="mlp"),
                     dict(adapter="a3c", env="CartPole-v1", num_envs=4, workers=1, policy="mlp"),
                     lambda r: r / 2 >= 0.8, "samples_per_s"), Needs("2 cores", cores=2), own=True),
    Claim("seed-over-impala", "distributed RL chapter (SEED RL, ICLR 2020)", "SEED's central inference on the "
          "learner's accelerator does better than IMPALA's actors each running the network",
          "qualitative (SEED RL: the same Atari throughput at lower cost)",
          "seed over impala, 8 actors, the network on the GPU, CartPole-v1 at 16 envs, samples/s > 1",
          pair_ratio(dict(adapter="seed", env="CartPole-v1", num_envs=16, device="cuda", workers=8),
                     dict(adapter="impala", env="CartPole-v1", num_envs=16, device="cuda", workers=8),
                     lambda r: r > 1, "samples_per_s"),
          Needs("a GPU for the central inference and 8 cores for the actors", cores=8, gpus=1), own=True,
          suite="suites/device/gpu-torch.toml"),
    Claim("apex-actors-scale", "distributed RL chapter (Ape-X, ICLR 2018)", "Ape-X's many actors feed one learner "
          "through a shared prioritized replay: data generation scales with actors",
          "qualitative (360 actors in the paper)",
          "apex with 8 actors over 1 actor, 2 envs each (CartPole-v1 at 16 and 2 envs, a 64x64 MLP), actor env "
          "steps/s: parallel efficiency >= 0.8, on a machine with a core for each actor and the learner",
          pair_ratio(dict(adapter="apex", env="CartPole-v1", num_envs=16, workers=8, policy="mlp"),
                     dict(adapter="apex", env="CartPole-v1", num_envs=2, workers=1, policy="mlp"),
                     lambda r: r / 8 >= 0.8, "actor_steps_per_s"),
          Needs("10 cores (8 actors, the learner, the replay)", cores=10), own=True,
          suite="suites/device/cores16.toml"),
    Claim("impala-250k", "IMPALA", "250,000 frames/s", "250k frames/s (a cluster)", "impala's frames/s at that "
          "size", needs=Needs("hundreds of CPU cores and GPUs", cores=256, gpus=8), suite="suites/learners.toml"),
    Claim("baselines-608", "openai/baselines#608", "subprocess vector envs run far slower than a loop on a cheap env",
          "SubprocVecEnv ~0.2x DummyVecEnv, CartPole, 16 envs",
          "sb3-subproc over sb3-dummy at 16 envs within a factor of 2 of 0.2",
          pair_ratio(dict(adapter="sb3-subproc", env="CartPole-v1", num_envs=16, policy="random"),
                     dict(adapter="sb3-dummy", env="CartPole-v1", num_envs=16, policy="random"),
                     lambda r: 0.1 <= r <= 0.4)),
    Claim("baselines-608-heavy", "openai/baselines#608", "on heavier envs subprocess vector envs win",
          "SubprocVecEnv / DummyVecEnv: HalfCheetah 1.5-2x, FetchPush 7-9x",
          "sb3-subproc over sb3-dummy on HalfCheetah-v4 at 16 envs > 1",
          pair_ratio(dict(adapter="sb3-subproc", env="HalfCheetah-v4", num_envs=16, policy="random"),
                     dict(adapter="sb3-dummy", env="HalfCheetah-v4", num_envs=16, policy="random"),
                     lambda r: r > 1), Needs("2 cores", cores=2),
          why_not="HalfCheetah-v4 in MuJoCo 3 steps faster than the step cost at which subprocesses overtake the loop "
                  "on these machines (validation.csv's crossover rows): here it is a light env"),
    Claim("gymnasium-shared-memory", "Gymnasium's documentation", "AsyncVectorEnv through shared memory is faster "
          "than through pipes", "~1.64x on 5 Breakout envs",
          "gymnasium-async shared_memory=true over false, ALE/Breakout-v5 (the raw 210x160x3 frames, 100 KB, as "
          "Gymnasium's docs stepped them), 5 envs, within 25%",
          pair_ratio(dict(adapter="gymnasium-async", env="ALE/Breakout-v5", num_envs=5, policy="random",
                          shared_memory=True),
                     dict(adapter="gymnasium-async", env="ALE/Breakout-v5", num_envs=5, policy="random",
                          shared_memory=False),
                     lambda r: _within(r, 1.64, 0.25))),
    Claim("storage-bottleneck", "storage survey", "storage is becoming the bottleneck of RL training: learners "
          "sample up to 759 MB/s", "IMPALA 759 MB/s, R2D2 450 MB/s, DQN 181 MB/s of sampling",
          "at the IMPALA, R2D2 and DQN workloads' own add and sample rates together (target mode, buffers beyond "
          "the cache): no store keeps up in every repeat on some workload",
          rates_sustained(SURVEY_WORKLOADS),
          suite="suites/validate.toml (or suites/replay.toml)"),
    Claim("survey-storage-utilisation", "storage survey", "storage resources are poorly utilised (marked "
          "\"to be tested\")", "qualitative",
          "at the IMPALA, R2D2 and DQN workloads' own add and sample rates (target mode, buffers beyond the cache), "
          "an in-memory store's traffic (add + sample MB/s) under half the single-core memory-copy bandwidth the "
          "run measured, on every workload",
          bandwidth_share(SURVEY_WORKLOADS),
          suite="suites/validate.toml (or suites/replay.toml)"),
    Claim("reverb-access-speed", "distributed RL chapter (Reverb, 2021)", "Reverb's chunked tensors make replay "
          "data fast to access", "qualitative",
          "reverb in max-sample mode on IMPALA-Qbert (3 MB items, one sampling client): sample MB/s >= 759, the "
          "survey's most demanding learner",
          cell_bound(lambda ev: ev.find("reverb", "replay/IMPALA-Qbert", 1, mode="max-sample"), "sample_mb_per_s",
                     lambda v: v >= 759, lambda v: f"{v:,.0f} MB/s"),
          suite="suites/validate.toml (or suites/replay.toml)"),
    Claim("survey-bounded-reuse", "storage survey", "PPO's and IMPALA's items must be sampled a bounded number of "
          "times", "bounded reuse; the rates imply 87/50 = 1.74 (PPO) and 253/4 = 63.25 (IMPALA) samples per item",
          "at the survey's rates, items living their whole life in the window, sampled without a bound: some item "
          "is served more often than the bound the rates imply (2, 64), so a bound is needed (the stores that "
          "enforce it shown beside)",
          reuse_held({"replay/PPO-Qbert": 2, "replay/IMPALA-Qbert": 64}), suite="suites/replay-reuse.toml"),
    Claim("survey-capacity", "storage survey", "full replay buffers take 44 GB (DQN) to 300 GB (IMPALA)",
          "400k x 110 KB = 44 GB ... 100k x 3 MB = 300 GB", "a store holding the full IMPALA buffer",
          needs=Needs("300 GB of memory", ram_gb=300), suite="suites/replay.toml"),
    Claim("seed-r2d2-85gb", "SEED RL, via the storage survey", "an R2D2 replay of 1e5 trajectories of 120 frames "
          "takes 85 GB on the learner", "85 GB", "a store holding that buffer on the learner",
          needs=Needs("85 GB of memory", ram_gb=85), suite="suites/replay.toml"),
)


def _seconds_per_1m(ev: Evidence, env: str, published_s: float, **env_kwargs):
    """gymnax at 2,048 envs on the GPU; a gymnax env of its own registry is `gymnax:make` with its env_id."""
    cell = next(filter(None, (ev.find("gymnax", env, 2048, device=d, **env_kwargs) for d in ("gpu", "cuda"))), None)
    if cell is None:
        return None
    seconds = 1e6 / cell.steps_per_s.median
    return Measured(seconds <= published_s, f"{seconds:.3g} s per 1M steps", (cell.cell_id,))


def matrix(results_list, machine: dict = None, noise=None) -> list:
    """One JudgedClaim per claim, judged over the runs given (one machine: the first run's, unless `machine`),
    each ratio's CI widened by the machine's run-to-run noise (a rlbench.results.changes.Noise; None: the
    repeats of one run alone)."""
    ev = Evidence.of(results_list, noise.sd if noise is not None else 0.0)
    machine = machine if machine is not None else (results_list[0].record.machine if results_list else {})
    rows = []
    for c in CLAIMS:
        lacking = c.needs.lacking(machine) if c.needs else ""
        got = c.judge(ev) if c.judge and not lacking else None
        if c.judge is None:   # apart from the hardware: a rule that does not exist says nothing of this machine
            needs = f"; it needs {c.needs.what}" if c.needs else ""
            verdict, why = NO_RULE, f"no rule written yet: it would measure {c.rule} ({c.suite}){needs}"
        elif lacking:
            verdict, why = NOT_COMPARABLE, f"needs {c.needs.what}; {lacking}"
        elif got is None:
            verdict, why = NOT_MEASURED, f"no cell for it in the runs given ({c.suite} has them)"
        elif got.apart:
            verdict, why = NOT_MEASURED, f"{got.apart} ({c.suite} has them together)"
        elif got.open:
            verdict, why = INCONCLUSIVE, got.open
        else:
            verdict = REPRODUCED if got.holds else NOT_REPRODUCED
            why = "" if got.holds else (got.why or c.why_not)
        rows.append(JudgedClaim(c.id, c.source, c.says, c.published, c.rule, verdict,
                                measured=got.text if got else "", why=why, cells=tuple(got.cells) if got else (),
                                needs=c.needs.what if c.needs else "", own=c.own,
                                ratios=got.ratios if got else ()))
    return rows


def counts(rows) -> dict:
    """verdict -> how many claims have it."""
    return dict(Counter(r.verdict for r in rows))
