"""The answer of `rlbench tune`, from what was measured: the fastest configuration with its median and
95% CI, its speedup over the serial loop with a bootstrap CI, the runner-up and whether the lead is
significant, one line per other strategy saying why it lost, and the library call for the winner."""
import shlex

import numpy as np

from rlbench import registry
from rlbench.report.format import rate, sig, with_ci
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


def _cell_rows(rows, cell_id) -> list:
    return [r for r in rows if r["cell_id"] == cell_id and r["status"] == "ok" and not r.get("profiled")]


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


def decide(race, finalists, profile: dict, rows, workload, max_envs: int = None) -> dict:
    """The decision tune.json keeps and the console prints (see `lines`)."""
    every = [r for r in race.racers if r.values]
    if not finalists:
        return {"winner": None, "why_none": "no configuration completed a repeat", "strategies": strategies(
            race, None, profile, rows)}
    win = finalists[0]
    s = summarize(win.values)
    out = {"winner": {"cell_id": win.cell.cell_id, "config": config(win.cell), "adapter": win.adapter,
                      "num_envs": win.cell.workload.num_envs, "options": win.cell.given_options,
                      "steps_per_s": s.median, "ci_low": s.ci_low, "ci_high": s.ci_high, "n": s.n,
                      "snippet": snippet(win.cell), "command": rlbench_command(win.cell)}}
    base = race.baseline(every)
    if base is not None and base is not win:
        ratio, low, high = ratio_ci(win.values, base.values)
        out["speedup_over_serial"] = {"ratio": ratio, "ci_low": low, "ci_high": high, "baseline": base.cell.cell_id,
                                      "baseline_steps_per_s": base.median}
    elif base is win:
        out["speedup_over_serial"] = {"ratio": 1.0, "ci_low": 1.0, "ci_high": 1.0, "baseline": base.cell.cell_id,
                                      "baseline_steps_per_s": base.median}
    others = [r for r in finalists[1:] if r.adapter != win.adapter] or finalists[1:]
    if others:
        up = others[0]
        ratio, low, high = ratio_ci(up.values, win.values)
        out["runner_up"] = {"cell_id": up.cell.cell_id, "config": config(up.cell), "steps_per_s": up.median,
                            "ratio": ratio, "ci_low": low, "ci_high": high,
                            "lead": ("untested: fewer than 2 repeats on a side" if high != high else
                                     "significant" if high < 1 else "within the CI: not significant")}
    out["strategies"] = strategies(race, win, profile, rows)
    if max_envs and win.cell.workload.num_envs >= max_envs > 1:
        out["note"] = (f"the winner runs the largest num_envs tried ({max_envs}): more envs may be faster still "
                       f"(--max-envs {4 * max_envs})")
    return out


def snippet(cell) -> str:
    return registry.get(cell.adapter)().snippet(cell.workload, cell.options)


def strategies(race, win, profile, rows) -> list:
    """One line per strategy (adapter) that did not win: its best configuration and why it lost."""
    out = []
    by_adapter = {}
    for r in race.racers:
        by_adapter.setdefault(r.adapter, []).append(r)
    for left in race.left_out:
        by_adapter.setdefault(left.adapter, [])
    for name, racers in by_adapter.items():
        if win is not None and name == win.adapter:
            continue
        ran = [r for r in racers if r.values]
        if not ran:
            failed = next((r for r in racers if r.status == "failed"), None)
            left = next((x for x in race.left_out if x.adapter == name), None)
            why = failed.why if failed else f"{left.status}: {left.reason}" if left else "not run"
            out.append({"adapter": name, "status": failed.status if failed else left.status if left else "",
                        "why": why})
            continue
        best = max(ran, key=lambda r: r.median)
        ratio = best.median / win.median if win is not None else float("nan")
        # its bootstrap 95% CI from both sides' repeats (NaN bounds with fewer than 2 on a side)
        _, low, high = ratio_ci(best.values, win.values) if win is not None else (ratio, ratio, ratio)
        fate = best.why or {"finalist": "confirmed among the finalists"}.get(best.status, best.status)
        out.append({"adapter": name, "best": best.cell.cell_id, "config": config(best.cell),
                    "steps_per_s": best.median, "ratio_to_winner": ratio, "ratio_ci_low": low,
                    "ratio_ci_high": high, "status": best.status,
                    "why": "; ".join(filter(None, [fate, diagnosis(_cell_rows(rows, best.cell.cell_id), profile)]))})
    return sorted(out, key=lambda s: -(s.get("steps_per_s") or 0))


def lines(decision: dict, profile: dict, label: str) -> list:
    """The answer as the console prints it."""
    out = [f"env profile: {profile['step']['median_us']:.2f} us per step (p99 {profile['step']['p99_us']:.2f}, "
           f"CV {profile['step']['cv']:.0%}), reset {profile['reset_share']:.1%} of the time, "
           f"{profile['obs_bytes']} B per observation, {profile['rss_per_env_mb']:.1f} MB per env; policy "
           + ", ".join(f"{us:.1f} us at batch {b}" for b, us in profile["policy_us_per_batch"].items())]
    win = decision.get("winner")
    if not win:
        return out + [f"no answer: {decision.get('why_none')}"]
    out.append(f"\nFastest for {label} on this machine: {win['config']}")
    out.append(f"  {rate(win['steps_per_s'])} env steps/s [95% CI {rate(win['ci_low'])}, {rate(win['ci_high'])}], "
               f"n={win['n']}")
    sp = decision.get("speedup_over_serial")
    if sp:
        ci = "" if sp["ci_low"] != sp["ci_low"] else f" [{sp['ci_low']:.2f}, {sp['ci_high']:.2f}]"
        out.append(f"  {sp['ratio']:.2f}x{ci} the serial loop ({sp['baseline']}: {rate(sp['baseline_steps_per_s'])})")
    else:
        out.append("  (the serial loop was not measured: no speedup)")
    up = decision.get("runner_up")
    if up:
        ci = "" if up["ci_low"] != up["ci_low"] else f" [{up['ci_low']:.2f}, {up['ci_high']:.2f}]"
        out.append(f"  runner-up: {up['config']} at {sig(up['ratio'])}x{ci} of it; the lead is {up['lead']}")
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
