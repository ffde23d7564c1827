"""Measured vs published: EnvPool's benchmark table at 1 and 2 workers, the baselines#608 direction check on
CartPole, this machine's crossover step cost (synthetic env), and the gymnax README's seconds per 1M CartPole
steps, all from a run's cells. Every measured ratio has a bootstrap 95% CI from both cells' repeats
(measured_ci_low/high; docs/validate.md).
"""
import math

from rlbench.families.validation import reference
from rlbench.report.format import fixed, with_ci
from rlbench.results.stats import ratio_ci

# EnvPool's column -> (adapter, does a cell at `workers` belong to it)
STRATEGIES = {
    "for-loop": ("serial", lambda c, w: c.num_envs == w),
    "subprocess": ("gymnasium-async", lambda c, w: c.num_envs == w),
    # rollout worker processes (any envs per worker: EnvPool ran 1, its best, so a best-of like async)
    "sample-factory": ("sample-factory", lambda c, w: c.workers == w),
    "envpool-sync": ("envpool-sync", lambda c, w: c.num_envs == w),
    "envpool-async": ("envpool-async", lambda c, w: c.batch_size == w and c.num_envs > w),
}
RATIOS = (("envpool-sync", "subprocess"), ("envpool-async", "subprocess"), ("envpool-async", "envpool-sync"),
          ("envpool-sync", "for-loop"), ("subprocess", "for-loop"), ("sample-factory", "subprocess"),
          ("envpool-sync", "sample-factory"))
COLUMNS = ("check", "env", "workers", "quantity", "measured", "published", "measured_over_published",
           "measured_ci_low", "measured_ci_high", "tolerance", "verdict", "cells", "conditions")


def no_repeats(cell, key) -> list:
    """Without the ResultSet: no repeats, so no CI."""
    return []


def _ci(num, den, key, repeats) -> tuple:
    """(low, high): the bootstrap 95% CI of num's median `key` over den's, from both cells' repeats."""
    _, low, high = ratio_ci(repeats(num, key), repeats(den, key))
    return low, high


def _ok(cells):
    return [c for c in cells if c.n and c.steps_per_s.median == c.steps_per_s.median]


def _fps(cell) -> float:
    return cell.stat("frames_per_s").median


def best(cells, env, strategy, workers):
    """The fastest ok cell of a strategy at `workers` (EnvPool's async and Sample Factory columns are best-ofs)."""
    adapter, belongs = STRATEGIES[strategy]
    cands = [c for c in _ok(cells) if c.env == env and c.adapter == adapter and c.policy == "random"
             and belongs(c, workers)]
    return max(cands, key=_fps, default=None)


def envpool_table(cells, repeats=no_repeats) -> list:
    out = []
    for env, published in reference.ENVPOOL_LAPTOP_FPS.items():
        for workers in (1, 2):
            picked = {s: best(cells, env, s, workers) for s in STRATEGIES}
            for s, cell in picked.items():
                if cell:
                    pub = published[s][workers]
                    out.append(_row("envpool-table", env, workers, f"frames/s {s}", _fps(cell),
                                    pub, None, "context only (machine-dependent)", [cell]))
            for num, den in RATIOS:
                if picked[num] and picked[den]:
                    measured = _fps(picked[num]) / _fps(picked[den])
                    pub = published[num][workers] / published[den][workers]
                    ok = abs(measured / pub - 1) <= reference.RATIO_TOLERANCE
                    out.append(_row("envpool-table", env, workers, f"ratio {num} / {den}", measured, pub,
                                    reference.RATIO_TOLERANCE, "within tolerance" if ok else "outside tolerance",
                                    [picked[num], picked[den]],
                                    ci=_ci(picked[num], picked[den], "frames_per_s", repeats)))
    return out


def baselines_608(cells, repeats=no_repeats) -> list:
    ref = reference.BASELINES_608
    pairs = (("sb3-subproc", "sb3-dummy"), ("gymnasium-async", "gymnasium-sync"))
    out = []
    for sub, dummy in pairs:
        got = {a: next((c for c in _ok(cells) if c.adapter == a and c.env == ref["env"]
                        and c.num_envs == ref["num_envs"] and c.policy == "random"), None)
               for a in (sub, dummy)}
        if all(got.values()):
            measured = got[sub].steps_per_s.median / got[dummy].steps_per_s.median
            out.append(_row("baselines-608", ref["env"], ref["num_envs"], f"ratio {sub} / {dummy}", measured,
                            ref["subproc_over_dummy"], None,
                            "same direction (< 1)" if measured < 1 else "opposite direction (>= 1)",
                            list(got.values()), ref["source"], ci=_ci(got[sub], got[dummy], "steps_per_s", repeats)))
    return out


def crossover(cells, repeats=no_repeats) -> list:
    """Smallest synthetic step cost at which subprocesses beat the serial loop, per num_envs; the ratio at each
    cost with its bootstrap 95% CI in the conditions."""
    out = []
    synth = [c for c in _ok(cells) if c.env == "rlbench/Synthetic-v0" and c.policy == "random"]
    keys = sorted({(c.num_envs, c.env_kwargs.get("obs_bytes", 64)) for c in synth})
    for n, obs_bytes in keys:
        def at(adapter, n=n, obs_bytes=obs_bytes):
            return {cell.env_kwargs.get("step_cost_us", 0.0): cell for cell in synth if cell.adapter == adapter
                    and cell.num_envs == n and cell.env_kwargs.get("obs_bytes", 64) == obs_bytes}
        serial, sub = at("serial"), at("gymnasium-async")
        costs = sorted(set(serial) & set(sub))
        if len(costs) < 2:
            continue
        ratios = [(c, sub[c].steps_per_s.median / serial[c].steps_per_s.median) for c in costs]
        cross = next((i for i, (_, q) in enumerate(ratios) if q >= 1), None)
        if cross is None:
            value, verdict = float("nan"), f"subprocess never overtook the loop up to {fixed(costs[-1], 'g')} us"
        elif cross == 0:
            value, verdict = costs[0], f"subprocess already ahead at the smallest cost {fixed(costs[0], 'g')} us"
        else:
            value = _interpolate(ratios[cross - 1], ratios[cross])
            low, high = ratios[cross - 1][0], ratios[cross][0]
            verdict = f"between {fixed(low, 'g')} and {fixed(high, 'g')} us (log-interpolated)"
        used = [serial[c] for c in costs] + [sub[c] for c in costs]
        out.append(_row("crossover", f"rlbench/Synthetic-v0 (obs_bytes={obs_bytes})", n,
                        "step cost (us) where gymnasium-async overtakes serial", value, None, None, verdict, used,
                        "ratios: " + ", ".join(f"{fixed(c, 'g')}us " + with_ci(
                            q, *_ci(sub[c], serial[c], "steps_per_s", repeats), unit="x") for c, q in ratios)))
    return out


def gymnax_readme(cells, repeats=no_repeats) -> list:
    """The gymnax README's seconds per 1M CartPole steps beside ours (always blocked), and its headline
    ratio, subprocesses over gymnax on the CPU, which one machine can check."""
    out, got, picked = [], {}, {}
    for what, adapter, n, platform, published in reference.GYMNAX_README_S_PER_1M:
        cell = next((c for c in _ok(cells) if c.adapter == adapter and c.env == "CartPole-v1"
                     and c.num_envs == n and c.policy == "random"
                     and (adapter != "gymnax" or (c.device or "cpu").startswith(platform))), None)
        if cell:
            seconds = 1e6 / cell.steps_per_s.median
            got[what], picked[what] = seconds, cell
            out.append(_row("gymnax-readme", "CartPole-v1", n, f"s per 1M steps: {what}", seconds, published,
                            None, "context only (machine-dependent)", [cell], reference.GYMNAX_SOURCE))
    (sub, _, _, _, sub_pub), (cpu, _, _, _, cpu_pub) = reference.GYMNAX_README_S_PER_1M[:2]
    if sub in got and cpu in got:
        measured, published = got[sub] / got[cpu], sub_pub / cpu_pub
        # time per 1M steps is 1 / steps/s: subprocesses' time over gymnax's is gymnax's rate over theirs
        out.append(_row("gymnax-readme", "CartPole-v1", 10, "ratio subprocesses / gymnax CPU (time per 1M)",
                        measured, published, None,
                        "same order of magnitude" if 0.1 <= measured / published <= 10 else "different order",
                        [], reference.GYMNAX_SOURCE, ci=_ci(picked[cpu], picked[sub], "steps_per_s", repeats)))
    return out


def _interpolate(lo, hi) -> float:
    (c0, q0), (c1, q1) = lo, hi
    if c0 <= 0:
        return c0 + (1 - q0) / (q1 - q0) * (c1 - c0)
    t = (math.log(1) - math.log(q0)) / (math.log(q1) - math.log(q0))
    return math.exp(math.log(c0) + t * (math.log(c1) - math.log(c0)))


def _row(check, env, workers, quantity, measured, published, tolerance, verdict, cells, conditions=None, ci=None):
    """ci: (low, high) of a measured ratio (NaN when unknown); None for a quantity that is not a ratio."""
    ratio = measured / published if published and measured == measured else None
    low, high = ci if ci is not None else (None, None)
    return {"check": check, "env": env, "workers": workers, "quantity": quantity, "measured": measured,
            "published": published, "measured_over_published": ratio, "measured_ci_low": low,
            "measured_ci_high": high, "tolerance": tolerance,
            "verdict": verdict, "cells": " | ".join(c.cell_id for c in cells),
            "conditions": conditions or (reference.ENVPOOL_CONDITIONS if check == "envpool-table" else "")}


def validation_rows(results) -> list:
    cells = list(results.cells.values())

    def repeats(cell, key) -> list:
        """A cell's `key`, one value per successful repeat (what its median and the ratio CIs come from)."""
        return [r.get(key) for r in results.benchmarks[cell.cell_id].ok_runs]

    out = (envpool_table(cells, repeats) + baselines_608(cells, repeats) + crossover(cells, repeats)
           + gymnax_readme(cells, repeats))
    versions = measured_versions(results.record.machine)
    for r in out:
        if r["check"] == "envpool-table" and versions:
            r["conditions"] += f"; measured here with {versions}"
    return out


def measured_versions(machine) -> str:
    packages = machine.get("packages") or {}
    return ", ".join(f"{p} {packages[p]}" for p in ("envpool", "gymnasium", "ale-py", "mujoco") if packages.get(p))
