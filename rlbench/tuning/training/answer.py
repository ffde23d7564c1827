"""`rlbench tune --train`'s answer from its race (rlbench.tuning.training.race): the winner with its objective over
seeds and the CI, the runner-up told apart or not, the three levels and the bottleneck, the winner's recipe under
the other execution settings (ranked only where the seeds' noise and the learner's share allow), setup and compile
apart with the run length a slower starter would need; printed as lines."""
import math

from rlbench.report.format import rate
from rlbench.results import levels as lv
from rlbench.results.train_decision import Standing, TrainDecision


def standing(entry, target) -> Standing:
    rows = entry.rows
    times = tuple(entry.times()) if target is not None else ()
    compile_s = next((r.get("compile_s") for r in entry.ok_rows if r.get("compile_s") is not None), None)
    return Standing(entry.cell.cell_id, entry.cfg.config, entry.cell.adapter, entry.cell.workload.num_envs,
                    entry.cfg.recipe, entry.status, entry.why, tuple(r.repeat for r in rows), times,
                    tuple(round(c, 1) for c in entry.caps), tuple(r.get("steps_to_target") for r in rows),
                    tuple(r.steps_per_s for r in rows), tuple(r.get("return_first") for r in rows),
                    tuple(r.get("return_mean") for r in rows), entry.setup_s(), compile_s,
                    entry.median_time() if target is not None else None, entry.median_rate())


def decide(race, label: str, algo: str, budget_s: float, used_s: float, level_rows=(None, None),
           interrupted: str = "", devices: str = "") -> TrainDecision:
    target = race.target
    objective = f"time to return {target:g}" if target is not None else "training env steps/s"
    standings = tuple(standing(e, target) for e in race.entries)
    common = dict(label=label, algo=algo, objective=objective, target_return=target, seeds=race.seeds,
                  budget_s=budget_s, used_s=round(used_s, 1), stop_reason=race.stop_reason, interrupted=interrupted,
                  standings=standings, devices=devices)
    win, second = race.winner()
    if win is None:
        why = (f"no configuration reached {target:g} within its cap" if target is not None
               else "no configuration's return moved in its window")
        return TrainDecision(winner=None, why_none=why, **common)
    values = win.counted() if target is not None else win.rates()
    s = race.summary(values)
    unit = "s" if target is not None else "env steps/s"
    censored = sum(t is None for t in win.times()) if target is not None else 0
    figure = (f"median {_fmt(s.median, unit)} [95% CI {_fmt(s.ci_low, unit)}, {_fmt(s.ci_high, unit)}] over "
              f"{len(values)} seed{'s' if len(values) != 1 else ''}"
              + (f" ({censored} did not reach it: counted at their caps)" if censored else ""))
    training_row = max(win.ok_rows, key=lambda r: r.steps_per_s or 0)
    levels = lv.from_rows(training_row, *level_rows)
    kind, neck = lv.bottleneck(levels, training_row)
    return TrainDecision(winner=standing(win, target), figure=figure, median=s.median, ci_low=s.ci_low,
                         ci_high=s.ci_high, runner_up=runner_up(race, win, second, unit), levels=levels,
                         bottleneck=neck, bottleneck_kind=kind, vec_note=vec_note(race, win, levels, kind),
                         startup=startup(race, win), command=command(win, race), **common)


def _fmt(value, unit: str) -> str:
    if value is None or not math.isfinite(value):
        return "?"
    return f"{value:.1f} s" if unit == "s" else f"{rate(value)}"


def runner_up(race, win, second, unit: str) -> str:
    if second is None:
        return ""
    a = race.summary(win.counted() if race.target is not None else win.rates())
    b = race.summary(second.counted() if race.target is not None else second.rates())
    if len(second.rows) < 2 or not all(map(math.isfinite, (a.ci_low, a.ci_high, b.ci_low, b.ci_high))):
        apart = "on too few seeds to tell apart"
    elif (a.ci_high < b.ci_low) if race.target is not None else (a.ci_low > b.ci_high):
        apart = "told apart: the CIs do not overlap"
    else:
        apart = "not told apart by these seeds: the CIs overlap (a tie within the seeds' spread)"
    return (f"{second.cfg.config}: median {_fmt(b.median, unit)} [{_fmt(b.ci_low, unit)}, {_fmt(b.ci_high, unit)}] "
            f"over {len(second.rows)} seeds, {apart}")


def vec_note(race, win, levels, kind: str) -> str:
    """The winner's recipe (its learner and num_envs) under its other execution settings (the vector env
    underneath): each ranked by its training rate only beyond the seeds' spread; those within it are said to tie,
    with, learner-bound, what a vector env twice as fast could gain at most."""
    same = [e for e in race.entries if e.cfg.key == win.cfg.key and e is not win and e.rates()]
    if not same:
        return ""
    rates = win.rates()
    spread = (max(rates) / min(rates) - 1) if len(rates) > 1 and min(rates) > 0 else 0.0
    split = lv.shares(levels)
    bound = 1 / (1 - split["env"] / 2) - 1 if split else None
    limit = max(spread, 0.05)
    ratios = sorted(((e.median_rate() or 0) / (win.median_rate() or 1), e.cfg.config) for e in same)[::-1]
    apart = ", ".join(f"{c} {r:.2f}x" for r, c in ratios if abs(r - 1) > limit)
    tied = ", ".join(f"{c} {r:.2f}x" for r, c in ratios if abs(r - 1) <= limit)
    why = f"within the {limit:.0%} the seeds' rates spread" + (
        f"; learner-bound, a vector env twice as fast could gain at most {bound:.0%}" if kind == "learner"
        and bound is not None else "")
    out = [f"trains at {apart} of its rate (beyond the seeds' spread: {limit:.0%})"] if apart else []
    out += [f"at {tied}: not ranked, {why}"] if tied else []
    return "the same recipe on other settings " + "; ".join(out)


def startup(race, win) -> str:
    """Setup and compile apart from the objective. With a target: the time to it with setup counted, and any
    configuration that would then be ahead. The training length at which a configuration with the other trade-off
    (a quicker start and a slower rate, or the reverse) would cross: only against those that learn alike per env
    step (with a target, the winner's own recipe under other settings; without one, every one that learned),
    since a rate says nothing of a recipe that needs more steps."""
    setup, rate_w = win.setup_s(), win.median_rate()
    if setup is None or not rate_w:
        return ""
    compile_s = next((r.get("compile_s") for r in win.ok_rows if r.get("compile_s") is not None), None)
    text = f"setup {setup:.1f} s" + (f" (of which the JIT compile {compile_s:.1f} s)" if compile_s else "") + \
        (", kept apart from its time to the target" if race.target is not None else ", kept apart from its rate")
    learned = [e for e in race.entries if e is not win and e.status in ("screened", "finalist")
               and e.setup_s() is not None and e.median_rate()]
    if race.target is not None and win.median_time() is not None:
        total = setup + win.median_time()
        text += f" (with it: {total:.1f} s to {race.target:g})"
        ahead = [e for e in learned if e.median_time() is not None and e.setup_s() + e.median_time() < total]
        if ahead:
            e = min(ahead, key=lambda e: e.setup_s() + e.median_time())
            text += (f"; counting setup, {e.cfg.config} would be ahead: {e.setup_s() + e.median_time():.1f} s "
                     f"(its median over {len(e.rows)} seed{'s' if len(e.rows) != 1 else ''})")
        learned = [e for e in learned if e.cfg.key == win.cfg.key]
    other = [e for e in learned if (e.setup_s() - setup) * (e.median_rate() - rate_w) > 0]
    if not other:
        return text
    e = max(other, key=lambda e: e.median_rate() if e.median_rate() > rate_w else -e.setup_s())
    d_setup, r_e = e.setup_s() - setup, e.median_rate()
    steps = d_setup / (1 / rate_w - 1 / r_e)   # where setup + steps / rate is equal for the two
    who = f"{e.cfg.config} (setup {e.setup_s():.1f} s, {rate(r_e)} env steps/s)"
    if r_e > rate_w:   # it starts slower and runs faster: ahead on a longer run
        return f"{text}; a training run longer than {steps:,.0f} env steps would favour {who}"
    return (f"{text}; a training run shorter than {steps:,.0f} env steps ({steps / rate_w:.1f} s of its training) "
            f"would favour {who}, which starts sooner")


def command(win, race) -> str:
    cell = win.cell
    opts = " ".join(f"--opt {k}={v}" for k, v in cell.given_options.items())
    seeds = f" --seeds {race.seeds}" if race.seeds > 1 else ""
    return (f"rlbench run --adapter {cell.adapter} --env {cell.workload.env_id} --num-envs "
            f"{cell.workload.num_envs} --policy {policy_text(cell.workload.policy)} {opts}{seeds}").strip()


def policy_text(policy) -> str:
    """The --policy that names a network again, on its device (a winner on cuda is reproduced there)."""
    fields = [f"hidden={'x'.join(map(str, policy.hidden))}"] if policy.name in ("mlp", "lstm") else []
    fields += [f"device={policy.device}"] if policy.device != "cpu" else []
    return policy.name + (":" + ",".join(fields) if fields else "")


def lines(d: TrainDecision) -> list:
    out = [f"rlbench tune --train {d.algo}: {d.label}, objective: {d.objective}, {d.seeds} seeds"]
    if d.interrupted:
        out.append(f"  cut short ({d.interrupted}): this answer covers what was measured")
    if d.winner is None:
        return out + [f"  no answer: {d.why_none}"] + _table(d)
    w = d.winner
    out += [f"  fastest to train: {w.config}", f"    {w.recipe}", f"    {d.objective}: {d.figure}"]
    if d.runner_up:
        out.append(f"    runner-up: {d.runner_up}")
    if d.levels is not None:
        lv_ = d.levels
        out.append(f"  levels (env steps/s): env step {rate(lv_.env_steps_per_s)}, + inference "
                   f"{rate(lv_.inference_steps_per_s)}, + training {rate(lv_.training_steps_per_s)}  ({lv_.source})")
    out += [f"  bottleneck: {d.bottleneck}"]
    out += [f"  {x}" for x in (d.vec_note, d.startup) if x]
    out.append(f"  reproduce: {d.command}")
    raced = [f"  the learner's device raced: {d.devices}"] if d.devices else []
    return out + _table(d) + raced + [f"  search: {d.stop_reason}; {d.used_s:.0f} s of the {d.budget_s:.0f} s budget"]


def _table(d: TrainDecision) -> list:
    out = ["  every configuration:"]
    for s in d.standings:
        if d.target_return is not None:
            times = ", ".join("-" if t is None else f"{t:.1f}" for t in s.times_s) or "-"
            fig = f"time to {d.target_return:g} (s) per seed: {times}"
        else:
            fig = "env steps/s per seed: " + (", ".join(rate(v) for v in s.steps_per_s if v) or "-")
        out.append(f"    {s.config:<58} {s.status:<9} {fig}" + (f"  ({s.why})" if s.why and s.status != "finalist"
                                                                  else ""))
    return out
