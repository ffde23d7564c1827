"""The answer of `rlbench tune`, from what was measured: rlbench.report.ranking's verdict over the run's
rows (the fastest configuration, its speedup over the serial baseline, the runner-up and whether the lead
is significant: the run's own headline, word for word), the winner's median and 95% CI, one line per other
strategy saying why it lost or never ran, and the library call for the winner."""
import shlex

import numpy as np

from rlbench import registry
from rlbench.report import ranking
from rlbench.report.format import rate, with_ci
from rlbench.results.stats import ratio_ci, summarize
from rlbench.tuning.candidates import config


def rlbench_command(cell) -> str:
    w = cell.workload
    parts = ["rlbench", "run", "--adapter", cell.adapter, "--env", w.env_id, "--num-envs", str(w.num_envs)]
    for k, v in sorted(w.env_kwargs.items()):
        parts += ["--env-kwarg", f"{k}={v}"]
    if w.policy.name != "random":
        parts += ["--policy", w.policy.factory or w.policy.label]
    for k, v in sorted(cell.given_options.items()):
        parts += ["--opt", f"{k}={str(v).lower() if isinstance(v, bool) else v}"]
    return shlex.join(parts)


def _cell_rows(results, cell_id) -> list:
    bench = results.benchmarks.get(cell_id)
    return [dict(r) for r in bench.ok_runs if not r.get("profiled")] if bench else []


def diagnosis(rows, profile: dict) -> str:
    """What the measurements say about a configuration: its wall time per env step outside the policy
    (env, IPC and waiting, all workers together) against one env's own step in one process, the cores it
    kept busy, and the policy's share."""
    if not rows:
        return ""
    outside = [((r.get("env_s") if r.get("env_s") is not None else r["seconds"] - (r.get("policy_s") or 0))
                / r["env_steps"] * 1e6) for r in rows if r.get("env_steps") and r.get("seconds")]
    if not outside:
        return ""
    per_step_us = float(np.median(outside))
    own_us = profile["step"]["median_us"]
    util = float(np.median([r.get("cpu_util") or 0 for r in rows]))
    cpus = rows[0].get("cpus") or 1
    policy_share = float(np.median([(r.get("policy_s") or 0) / r["seconds"] for r in rows if r.get("seconds")]))
    said = [f"{per_step_us:.2f} us per env step outside the policy vs {own_us:.2f} us for one env's own step",
            f"{util:.1f} of {cpus} cores busy"]
    if policy_share > 0.3:
        said.append(f"{policy_share:.0%} of the time in the policy")
    workers = rows[0].get("workers") or 1
    if workers == 1 and cpus > 1:
        said.append("one process steps every env: the other cores cannot help")
    elif per_step_us > own_us * 1.1:
        said.append("its per-step overhead (IPC, batching, waiting) costs more than parallel stepping saves")
    elif util < 0.6 * cpus:
        said.append(f"{workers} workers kept only {util:.1f} cores busy")
    return "; ".join(said)


def decide(search, results, profile: dict, max_envs: int = None) -> dict:
    """The decision tune.json keeps and the console prints (see `lines`): rlbench.report.ranking's verdict
    over the run's cells (the same a `rlbench run` headline of them gives), each strategy's fate in the search."""
    v = ranking.verdict([ranking.entry(c, results) for c in ranking.competing(results.cells.values())])
    if v is None:
        return {"winner": None, "why_none": "no configuration completed a repeat",
                "strategies": strategies(search, None, profile, results)}
    by_id = search.by_id
    cell = by_id[v.winner.cell_id].cell
    s = summarize(v.winner.values)
    out = {"verdict": v.sentence(),
           "winner": {"cell_id": cell.cell_id, "config": config(cell), "adapter": cell.adapter,
                      "num_envs": cell.workload.num_envs, "options": cell.given_options,
                      "steps_per_s": s.median, "ci_low": s.ci_low, "ci_high": s.ci_high, "n": s.n,
                      "snippet": snippet(cell), "command": rlbench_command(cell)}}
    if v.baseline is not None:
        out["speedup_over_serial"] = {"ratio": v.speedup.value, "ci_low": v.speedup.low, "ci_high": v.speedup.high,
                                      "baseline": v.baseline.cell_id, "baseline_steps_per_s": v.baseline.median}
    if v.runner_up is not None:
        share = v.runner_share
        out["runner_up"] = {"cell_id": v.runner_up.cell_id, "config": config(by_id[v.runner_up.cell_id].cell),
                            "steps_per_s": v.runner_up.median, "ratio": share.value, "ci_low": share.low,
                            "ci_high": share.high, "lead": v.lead}
    out["strategies"] = strategies(search, by_id[v.winner.cell_id], profile, results)
    if max_envs and cell.workload.num_envs >= max_envs > 1:
        out["note"] = (f"the winner runs the largest num_envs allowed ({max_envs}): more envs may be faster still "
                       f"(--max-envs {2 * max_envs})")
    return out


def snippet(cell) -> str:
    return registry.get(cell.adapter)().snippet(cell.workload, cell.options)


def strategies(search, win, profile, results) -> list:
    """One line per strategy (adapter) that did not win: its best measured configuration and why it lost,
    or, never measured, why not (pruned with its prediction, failed, unsupported, out of budget)."""
    out, by_adapter = [], {}
    for c in search.candidates:
        by_adapter.setdefault(c.adapter, []).append(c)
    for left in search.space.left:
        by_adapter.setdefault(left.adapter, [])
    for name, cands in by_adapter.items():
        if win is not None and name == win.adapter:
            continue
        ran = [c for c in cands if c.values]
        if not ran:
            fate = (next((c for c in cands if c.status == "failed"), None)
                    or max((c for c in cands if c.status == "pruned"), key=lambda c: c.predicted or 0, default=None)
                    or next(iter(cands), None))
            left = next((x for x in search.space.left if x.adapter == name), None)
            if fate is not None:
                out.append({"adapter": name, "status": fate.status, "config": fate.config,
                            "predicted_max_steps_per_s": fate.predicted, "why": fate.why or fate.status})
            else:
                out.append({"adapter": name, "status": left.status if left else "",
                            "why": f"{left.status}: {left.reason}" if left else "not run"})
            continue
        best = max(ran, key=lambda c: c.median)
        ratio = best.median / win.median if win is not None else float("nan")
        # its bootstrap 95% CI from both sides' repeats (NaN bounds with fewer than 2 on a side)
        _, low, high = ratio_ci(best.values, win.values) if win is not None else (ratio, ratio, ratio)
        rows = _cell_rows(results, best.cell.cell_id)
        out.append({"adapter": name, "best": best.cell.cell_id, "config": best.config,
                    "steps_per_s": best.median, "ratio_to_winner": ratio, "ratio_ci_low": low,
                    "ratio_ci_high": high, "status": best.status,
                    "why": "; ".join(filter(None, [best.why or best.status, diagnosis(rows, profile)]))})
    return sorted(out, key=lambda s: -(s.get("steps_per_s") or 0))


def lines(decision: dict, profile: dict, label: str) -> list:
    """The answer as the console prints it."""
    out = [f"env profile: {profile['step']['median_us']:.2f} us per step (p99 {profile['step']['p99_us']:.2f}, "
           f"CV {profile['step']['cv']:.0%}), reset {profile['reset_share']:.1%} of the time, "
           f"{profile['obs_bytes']} B per observation, {profile['rss_per_env_mb']:.1f} MB per env; policy "
           + (", ".join(f"{us:.1f} us at batch {b}" for b, us in profile["policy_us_per_batch"].items())
              or f"inside the program {profile.get('adapter')} compiles (a JAX env: one env in its loop)")]
    win = decision.get("winner")
    if not win:
        return out + [f"no answer: {decision.get('why_none')}"]
    out.append(f"\nFastest for {label} on {decision.get('where', 'this machine')}: {win['config']}")
    out.append(f"  {rate(win['steps_per_s'])} env steps/s [95% CI {rate(win['ci_low'])}, {rate(win['ci_high'])}], "
               f"n={win['n']}")
    out.append(f"  {decision['verdict']}")
    if decision.get("search"):
        out.append(f"  search: {decision['search']}")
    if decision.get("note"):
        out.append(f"  note: {decision['note']}")
    out.append("\nWhy the others lost:")
    for s in decision["strategies"]:
        head = f"  {s['adapter']}: "
        if "best" in s:
            shown = with_ci(s["ratio_to_winner"], s.get("ratio_ci_low"), s.get("ratio_ci_high"), unit="x")
            head += f"best {s['config']} at {rate(s['steps_per_s'])} ({shown} of the winner); "
        out.append(head + s["why"])
    out.append("\nUse it:")
    if win["snippet"]:
        out.append(f"  {win['snippet']}")
    out.append(f"  {win['command']}")
    return out
