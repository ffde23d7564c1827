"""`rlbench tune --train ALGO`: which configuration trains fastest on this machine, answered by training. In the
shape of the stepping tune (rlbench.tuning): check the input (the learners, the env, the sizes: bad input refused
before anything is written), open the run folder, prepare the adapters' environments, race (race.py) under the
budget, measure the winner's first two levels apart (levels.py), decide (answer.py), write tune.json and the report,
print the answer. A resumed tune replays its rows (each training run a row of results.jsonl) and goes on."""
import os
import sys
import time
from dataclasses import replace

from rlbench.errors import UsageError
from rlbench.planning.flags import pairs
from rlbench.planning.plan import Settings
from rlbench.planning.request import names
from rlbench.planning.suite import Suite, make_cell
from rlbench.results.model import ResultSet
from rlbench.running.session import Job, session
from rlbench.tuning.candidates import cpus_here
from rlbench.tuning.clock import Clock, report_s
from rlbench.tuning.inputs import label, parse_budget, plan_workload
from rlbench.tuning.measure import SweepMeasurer, used_before
from rlbench.tuning.training.answer import decide, lines
from rlbench.tuning.training.race import TrainRace
from rlbench.tuning.training.space import TrainSpace, learner_devices
from rlbench.tuning.training.state import TrainState, read_train_state
from rlbench.workload import parse_policy

DEFAULT_SEEDS = 3
# every training run: from its first unit (the first one warm-up: lazy initialisation), a seed per repeat; the
# race sets each run's cap (duration_s) and its timeout; with a target a run stops once it reaches it
SETTINGS = Settings(warmup_s=0.0, warmup_units=1, duration_s=60.0, min_units=1, repeats=1, timeout_s=300.0,
                    seed_per_repeat=True)
# the first two levels, measured apart on the winner's collector: short windows, as the stepping tune's
LEVEL_PROTOCOL = (("duration_s", 1.0), ("min_units", 5), ("repeats", 1), ("timeout_s", 120.0),
                  ("until_target", False), ("warmup_s", 0.2), ("warmup_units", 2))
LEVELS_S = 25.0     # kept from the budget for them


def sizes_of(raw) -> tuple:
    if not raw:
        return ()
    try:
        sizes = tuple(int(x) for x in str(raw).split(","))
    except ValueError:
        raise UsageError(f"--sizes {raw!r} (valid: comma-separated positive integers, e.g. 4,8,16)") from None
    if not sizes or min(sizes) < 1:
        raise UsageError(f"--sizes {raw!r} (valid: comma-separated positive integers, e.g. 4,8,16)")
    return sizes


def devices_raced(devices, no_other: str) -> str:
    """The learner's devices raced, in words: the answer says where it trained, and why nowhere else."""
    return ", ".join(devices) + (f" ({no_other})" if no_other else "")


def train_workload(request):
    """The tune's workload with the network trained: --policy as given, `mlp` where it names none (a learner
    puts the Nature CNN on frames)."""
    workload = plan_workload(request)
    if workload.policy.name == "random":
        workload = replace(workload, policy=parse_policy("mlp"))
    return workload


def tune_train(request, resume: str = None) -> tuple:
    """(exit code, run folder) of `rlbench tune --train`."""
    t0 = time.monotonic()
    workload = train_workload(request)
    budget_s = parse_budget(request.budget)
    target = request.target_return
    seeds = request.seeds or DEFAULT_SEEDS
    if request.cluster:
        raise UsageError("--train with --cluster: a training race runs on this machine (valid: leave out --cluster)")
    devices, no_other = learner_devices(workload.policy)
    space = TrainSpace(workload, request.train, names(request.adapters), sizes_of(request.sizes), cpus_here(),
                       target, pairs("--opt", request.opt), devices)
    settings = replace(SETTINGS, until_target=target is not None)
    job = Job("tune", "tune", settings, request.planned(), out=request.out, resume=resume)
    cells = tuple(c.cell for c in space.configs)
    with session(job) as s:
        earlier = read_train_state(s.path) if s.resuming else None
        clock = Clock(t0, used_before(earlier, s.path))
        run = TrainTuning(s, space, workload, request.train, budget_s, seeds, target, clock, label(workload),
                          devices_raced(devices, no_other))
        with s.open(cells=len(cells)):
            with clock.apart():   # an adapter environment's first build is once per machine
                envs = s.prepare(Suite("tune", None, None, settings, cells))
            run.go(envs)
    if run.decision is not None:
        print("\n".join(lines(run.decision)))
    if s.view is not None:
        print(f"\nreport: {os.path.join(s.path, 'index.html')}  decision: {os.path.join(s.path, 'tune.json')}")
    print(f"rlbench tune --train: {clock.elapsed():.0f} s of the {budget_s:.0f} s budget used", file=sys.stderr)
    return s.exit_code(allow_errors=True) or (0 if run.decision and run.decision.winner else 1), s.path


class TrainTuning:
    """One training tune between its stages, so that however the race ends (done, out of budget, a signal) the
    decision is made from what was measured."""

    def __init__(self, s, space, workload, algo, budget_s, seeds, target, clock, label, devices: str):
        self.s, self.space, self.workload, self.algo = s, space, workload, algo
        self.budget_s, self.seeds, self.target, self.clock, self.label = budget_s, seeds, target, clock, label
        self.devices = devices
        self.race, self.decision, self.level_rows, self.rows_before = None, None, (None, None), ()
        s.at_end(self.end)

    def go(self, envs) -> None:
        s = self.s
        kept = {(r.cell_id, r.repeat): r for r in ResultSet.load(s.path).runs if r.status != "lost"}
        self.rows_before = tuple(sorted(kept))
        measurer = SweepMeasurer(s.run_id, s.job.settings, s.path, envs, kept=kept, clock=self.clock.elapsed)
        self.measurer = measurer
        deadline = self.budget_s - report_s(self.budget_s) - LEVELS_S
        say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
        self.race = TrainRace(self.space.configs, measurer, deadline, self.seeds, self.target, self.clock.elapsed,
                              say)
        say(f"rlbench tune --train {self.algo}: {len(self.space.configs)} configurations, {self.seeds} seeds for "
            f"the finalists, {self.budget_s:.0f} s")
        self.write(None)   # a tune killed from here on resumes
        self.race.go()
        self.level_rows = self.levels(measurer)

    def levels(self, measurer) -> tuple:
        """The winner's env step alone and + inference, on its collector at its num_envs (None, None: it has
        none, or the budget is spent)."""
        from rlbench import registry
        win, _ = self.race.winner()
        if win is None or self.budget_s - self.clock.elapsed() < LEVELS_S * 0.6:
            return None, None
        cell = win.cell
        found = registry.get(cell.adapter)().collector(cell.options)
        if not found:
            return None, None
        adapter, options = found
        rows = []
        for policy in (parse_policy("random"), cell.workload.policy):
            workload = replace(cell.workload, policy=policy)
            try:
                level = make_cell("tune --train: levels", adapter, workload, options)
            except UsageError:
                return None, None
            level = replace(level, protocol=LEVEL_PROTOCOL)
            got = measurer.run([level], 1, lambda _cell: True)
            rows.append(next((r for r in got if r.cell_id == level.cell_id), None))
        return tuple(rows)

    def end(self, outcome) -> tuple:
        interrupted = outcome.interrupted or outcome.store_failed
        if self.race is not None:
            self.decision = decide(self.race, self.label, self.algo, self.budget_s, self.clock.elapsed(),
                                   self.level_rows, interrupted=interrupted, devices=self.devices)
        return {"train_tune": self.decision, "cells": len(self.space.configs)}, {"tune.json": self.write(
            self.decision, to_file=False)}

    def write(self, decision, to_file: bool = True) -> str:
        from rlbench.report.writer import write_atomic
        text = TrainState(self.workload, self.algo, self.budget_s, self.clock.elapsed(), self.seeds, self.target,
                          tuple(c.cell.cell_id for c in self.space.configs), tuple(self.space.left),
                          self.rows_before, decision).to_json()
        if to_file:
            write_atomic(os.path.join(self.s.path, "tune.json"), text)
        return text
