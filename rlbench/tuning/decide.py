"""The answer of `rlbench tune`, from what was measured: rlbench.results.ranking's verdict over the run's
rows (the fastest configuration, its speedup over the serial baseline, the runner-up and whether the lead
is significant: the run's own headline, word for word), the winner's median and 95% CI, one line per other
strategy saying why it lost or never ran (and, where the calibration gave it no prediction, why not), how the
machine's calibration was had, and the library call for the winner."""
import math
import shlex

import numpy as np

from rlbench import registry
from rlbench.report.format import rate, with_ci
from rlbench.results import ranking
from rlbench.results.decision import Decision, Fate, Point, RunnerUp, Speedup, Winner
from rlbench.results.model import Run
from rlbench.results.stats import ratio_ci, summarize
from rlbench.tuning.candidates import config
from rlbench.tuning.clock import report_s
from rlbench.tuning.placement import placement
from rlbench.tuning.regime import regime
from rlbench.tuning.search import FINAL_REPEATS, START_REPEATS
from rlbench.workload import cli_text, kv_label


def rlbench_command(cell) -> str:
    w = cell.workload
    parts = ["rlbench", "run", "--adapter", cell.adapter, "--env", w.env_id, "--num-envs", str(w.num_envs)]
    for k, v in sorted(w.env_kwargs.items()):
        parts += ["--env-kwarg", f"{k}={cli_text(v)}"]
    if w.policy.name != "random":
        parts += ["--policy", w.policy.factory or w.policy.label]
    for k, v in sorted(cell.given_options.items()):
        parts += ["--opt", f"{k}={str(v).lower() if isinstance(v, bool) else v}"]
    return shlex.join(parts)


def _cell_rows(results, cell_id) -> list:
    bench = results.benchmarks.get(cell_id)
    return list(bench.ok_runs) if bench else []   # the profiled repeat is not one


def diagnosis(rows, profile: dict) -> str:
    """What the measurements say about a configuration: its wall time per env step outside the policy
    (env, IPC and waiting, all workers together) against one env's own step in one process, the cores it
    kept busy, and the policy's share. rows: its ok Runs (rlbench.results.model), or rows as written."""
    if not rows:
        return ""
    rows = [Run.of(r) for r in rows]
    outside = [((r.env_s if r.env_s is not None else r.seconds - (r.policy_s or 0)) / r.env_steps * 1e6)
               for r in rows if r.env_steps and r.seconds]
    if not outside:
        return ""
    per_step_us = float(np.median(outside))
    own_us = profile.step_us
    util = float(np.median([r.cpu_util or 0 for r in rows]))
    cpus = rows[0].cpus or 1
    policy_share = float(np.median([(r.policy_s or 0) / r.seconds for r in rows if r.seconds]))
    said = [f"{per_step_us:.2f} us per env step outside the policy vs {own_us:.2f} us for one env's own step",
            f"{util:.1f} of {cpus} cores busy"]
    if policy_share > 0.3:
        said.append(f"{policy_share:.0%} of the time in the policy")
    workers = rows[0].workers or 1
    if workers == 1 and cpus > 1:
        said.append("one process steps every env: the other cores cannot help")
    elif per_step_us > own_us * 1.1:
        said.append("its per-step overhead (IPC, batching, waiting) costs more than parallel stepping saves")
    elif util < 0.6 * cpus:
        said.append(f"{workers} workers kept only {util:.1f} cores busy")
    return "; ".join(said)


def decide(search, results, profile: dict, max_envs: int = None, **context) -> Decision:
    """The answer tune.json keeps and the console prints (see `lines`): rlbench.results.ranking's verdict over the
    run's cells (the same a `rlbench run` headline of them gives), each strategy's fate in the search, the search
    drawn and traced, the strategies raced without a prediction and why. `context`: the Decision's label, where,
    stop_reason, interrupted, budget_s, used_s, calibration and calibration_s."""
    entries = [ranking.entry(c, results) for c in ranking.competing(results.cells.values())]
    v = ranking.verdict(entries)
    once = measured_once_faster(entries, v)
    if once:   # never an answer slower than a configuration the search measured: the fastest, with its caveat
        v = ranking.verdict(entries, min_tested=1)
    trace = dict(points=chart_points(search), trace=tuple(search.rounds), uncalibrated=uncalibrated(search),
                 **context)
    if v is None:
        return Decision(why_none=search.why_none(),
                        strategies=strategies(search, None, profile, results), **trace)
    by_id = search.by_id
    win = by_id[v.winner.cell_id]
    cell = win.cell
    s = summarize(v.winner.values)
    winner = Winner(cell.cell_id, config(cell), cell.adapter, cell.workload.num_envs, cell.given_options, s.median,
                    s.ci_low, s.ci_high, s.n, snippet(cell), rlbench_command(cell))
    speedup = None if v.baseline is None else Speedup(v.speedup.value, v.speedup.low, v.speedup.high,
                                                      v.baseline.cell_id, v.baseline.median)
    runner_up = None
    if v.runner_up is not None:
        share = v.runner_share
        runner_up = RunnerUp(v.runner_up.cell_id, config(by_id[v.runner_up.cell_id].cell), v.runner_up.median,
                             share.value, share.low, share.high, v.lead)
    notes = [once] if once else []
    if max_envs and cell.workload.num_envs >= max_envs > 1:
        notes.append(f"the winner runs the largest num_envs allowed ({max_envs}): more envs may be faster still "
                     f"(--max-envs {2 * max_envs})")
    rows = _cell_rows(results, cell.cell_id)
    bound = regime(rows, profile, gpu_option=any(d != "cpu" for d in profile.devices))
    return Decision(winner=winner, verdict=v.sentence(), speedup=speedup, runner_up=runner_up,
                    strategies=strategies(search, win, profile, results), note="; ".join(notes),
                    placement=placement(cell, profile, rows), regime=bound.text if bound else "",
                    budget_note=budget_note(search, v, context.get("used_s")), **trace)


def measured_once_faster(entries, v) -> str:
    """Where the budget ended before a configuration's second repeat and that one repeat is faster than the
    tested winner: the caveat of answering with it (issue 63: tune answered a serial loop at 6.03k env steps/s
    while listing rlpyt-cpu at 11.20k, measured once, as "not raced to the end"); "" otherwise."""
    if v is None:
        return ""
    faster = [e for e in entries if 0 < len(e.values) < ranking.MIN_TESTED and e.median > v.winner.median]
    if not faster:
        return ""
    best = max(faster, key=lambda e: e.median)
    n = len(best.values)
    return (f"{best.text} was measured {n} time{'s' * (n != 1)} only (the budget ended before its repeat "
            f"{n + 1}): its rate has no CI, but it is the fastest measured, {best.median / v.winner.median:.2f}x "
            f"{v.winner.text} ({len(v.winner.values)} repeats)")


TIE = 0.03   # a runner-up whose share of the winner has its 95% CI within this of 1x ties with it


def budget_note(search, v, used_s) -> str:
    """One line where the budget ended the search before the winner could be told from the runner-up (their lead
    untested or within the noise): which two, and the budget that would race them to their confirmation; or, where
    the runner-up's share's CI lies within TIE of 1x, that they tie (a slow env's workers on 2 cores: 1.00x [0.99,
    1.00]), which no budget would change."""
    if search.converged or v.runner_up is None or v.lead == "significant":
        return ""
    share = v.runner_share
    if share.tested and 1 - TIE <= share.low and share.high <= 1 + TIE:
        return (f"{v.winner.text} and {v.runner_up.text} tie: the runner-up's {share.text} of the winner lies within "
                f"{TIE:.0%} of it, so more budget would not separate them; either will do")
    pair = [search.by_id[e.cell_id] for e in (v.winner, v.runner_up) if e.cell_id in search.by_id]
    untested = [c for c in search.candidates if c.status == "budget"]
    more_s = search.cost_s(pair, FINAL_REPEATS) + search.cost_s(untested, START_REPEATS)
    need_s = (used_s if used_s is not None else search.measurer.elapsed()) + more_s
    lead = ranking.LEAD_WORDS[v.lead].split(" (")[0]
    return (f"the budget was too small to separate {v.winner.text} from {v.runner_up.text} ({lead}); "
            f"--budget {math.ceil((need_s + report_s(need_s)) / 60)}m would race them to {FINAL_REPEATS} "
            f"repeats each" + (f" and test the {len(untested)} configurations left" if untested else ""))


def chart_points(search) -> tuple:
    """The search as the Recommendation chart draws it: each configuration measured (its median) or pruned
    (its prediction), by strategy and num_envs."""
    return tuple(Point(" ".join(filter(None, (c.adapter, kv_label(c.cell.given_options)))), c.num_envs,
                       c.median if c.values else c.predicted, c.status, c.config, len(c.values))
                 for c in search.candidates if c.values or (c.status == "pruned" and c.predicted))


def uncalibrated(search) -> dict:
    """adapter -> why the calibration gave it no prediction (its cells failed or outlived their bound), of the
    strategies this search could race."""
    return {a: why for a in search.space.adapters if (why := search.calibration.failure(a))}


def unpredicted(search, adapter: str) -> str:
    why = search.calibration.failure(adapter)
    return f"raced without a prediction: no calibration ({why})" if why else ""


def snippet(cell) -> str:
    return registry.get(cell.adapter)().snippet(cell.workload, cell.options)


def strategies(search, win, profile, results) -> tuple:
    """The Fate of every strategy (adapter) that did not win: its best measured configuration and why it lost,
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
            out.append(never_measured(search, name, cands))
            continue
        best = max(ran, key=lambda c: c.median)
        ratio = best.median / win.median if win is not None else float("nan")
        # its bootstrap 95% CI from both sides' repeats (NaN bounds with fewer than 2 on a side)
        _, low, high = ratio_ci(best.values, win.values) if win is not None else (ratio, ratio, ratio)
        rows = _cell_rows(results, best.cell.cell_id)
        said = [best.why or best.status, diagnosis(rows, profile), unpredicted(search, name)]
        out.append(Fate(name, best.status, "; ".join(filter(None, said)),
                        best.config, best.cell.cell_id, best.median, ratio, low, high))
    return tuple(sorted(out, key=lambda f: -(f.steps_per_s or 0)))


def never_measured(search, name, cands) -> Fate:
    """A strategy none of whose configurations completed a repeat: the first that failed, else the pruned one
    predicted fastest, else the first tried; or, never tried, why the space left it out."""
    fate = (next((c for c in cands if c.status == "failed"), None)
            or max((c for c in cands if c.status == "pruned"), key=lambda c: c.predicted or 0, default=None)
            or next(iter(cands), None))
    if fate is not None:
        return Fate(name, fate.status, "; ".join(filter(None, [fate.why or fate.status, unpredicted(search, name)])),
                    fate.config, predicted_max_steps_per_s=fate.predicted)
    left = next((x for x in search.space.left if x.adapter == name), None)
    return Fate(name, left.status if left else "", f"{left.status}: {left.reason}" if left else "not run")


def lines(decision: Decision, profile: dict) -> list:
    """The answer as the console prints it."""
    p = profile
    out = [f"env profile: {p.step_us:.2f} us per step (p99 {p.step_p99_us:.2f}, CV {p.step_cv:.0%}), reset "
           f"{p.reset_share:.1%} of the time, {p.obs_bytes} B per observation, {p.rss_per_env_mb:.1f} MB per env; "
           "policy " + (", ".join(f"{us:.1f} us at batch {b}" for b, us in p.policy_us_per_batch.items())
                        or f"inside the program {p.adapter} compiles (a JAX env: one env in its loop)")]
    if decision.calibration:
        out.append(f"calibration: {decision.calibration}")
    win = decision.winner
    if win is None:
        return out + [f"no answer: {decision.why_none}"]
    out.append(f"\nFastest for {decision.label} on {decision.where}: {win.config}")
    out.append(f"  {rate(win.steps_per_s)} env steps/s [95% CI {rate(win.ci_low)}, {rate(win.ci_high)}], n={win.n}")
    out.append(f"  {decision.verdict}")
    if decision.placement:
        out.append(f"  {decision.placement}")
    if decision.regime:
        out.append(f"  bound: {decision.regime}")
    out.append(f"  search: {decision.search}")
    if decision.note:
        out.append(f"  note: {decision.note}")
    if decision.budget_note:
        out.append(f"  budget: {decision.budget_note}")
    out.append("\nWhy the others lost:")
    for f in decision.strategies:
        head = f"  {f.adapter}: "
        if f.measured:
            shown = with_ci(f.ratio_to_winner, f.ratio_ci_low, f.ratio_ci_high, unit="x")
            head += f"best {f.config} at {rate(f.steps_per_s)} ({shown} of the winner); "
        out.append(head + f.why)
    out.append("\nUse it:")
    if win.snippet:
        out.append(f"  {win.snippet}")
    out.append(f"  {win.command}")
    return out
