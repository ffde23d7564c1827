"""`rlbench tune`: which strategy steps this env fastest on this machine, answered by measuring. In the
shape of `rlbench run`: check the input (the env is built once), profile the env in its own process, open
the run folder, calibrate what this machine has not seen, search (rlbench.tuning.search) under the budget,
decide, write tune.json and the report, print the answer. Each stage is one call here; the whole keeps to the
budget but the machine's calibration, which runs apart from it (rlbench.tuning.clock: once per machine, it would
make a first tune worse than every later one) and is reported with its own time."""
import json
import os
import subprocess
import sys
import time
from dataclasses import replace

from rlbench import registry
from rlbench.errors import UsageError
from rlbench.planning.plan import Settings
from rlbench.planning.request import names
from rlbench.planning.suite import Suite
from rlbench.report.writer import write_atomic
from rlbench.results.model import ResultSet
from rlbench.running.session import Job, session
from rlbench.tuning import calibrate, units
from rlbench.tuning.calibration import calibrate_here, not_calibrated, sentence
from rlbench.tuning.candidates import Space, available_mb, cpus_here, default_max_envs, stepping_adapters
from rlbench.tuning.clock import Clock, report_s
from rlbench.tuning.decide import decide, lines
from rlbench.tuning.inputs import label, parse_budget, plan_workload
from rlbench.tuning.measure import SweepMeasurer, used_before
from rlbench.tuning.profile import EnvProfile
from rlbench.tuning.search import Search, probe_sizes
from rlbench.tuning.state import TUNE_JSON, CandidateRecord, TuneState
from rlbench.tuning.state import read as read_state

PROFILE_TIMEOUT_S = 300
# every measurement: the normal protocol, shorter windows (the race repeats what matters)
SETTINGS = Settings(warmup_s=0.2, warmup_units=2, duration_s=0.5, min_units=5, repeats=2, timeout_s=60.0)


def tune(request, resume: str = None) -> tuple:
    """(exit code, run folder) of `rlbench tune` asked this rlbench.planning.request.TuneRequest; `resume`: the
    folder of an interrupted tune, whose search goes on with the budget it left."""
    if request.train:
        from rlbench.tuning.training import tune_train
        return tune_train(request, resume)
    for given, flag in ((request.target_return, "--target-return"), (request.seeds, "--seeds"),
                        (request.sizes, "--sizes"), (request.opt or None, "--opt")):
        if given is not None:
            raise UsageError(f"{flag} is for a training tune (valid: add --train ALGO, or leave {flag} out)")
    t0 = time.monotonic()
    workload = plan_workload(request)
    budget_s = parse_budget(request.budget)
    named = names(request.adapters)
    stepping_adapters(named)  # unknown or non-stepping names: refused before anything runs
    calibrate.bounds()        # so is a bad $RLBENCH_CALIBRATION_CELL_S or _STARTUP_S
    settings = replace(SETTINGS, cluster=_address(request), node_class=request.node_class or "")
    job = Job("tune", "tune", settings, request.planned(), out=request.out, resume=resume)
    with session(job) as s:
        t = Tuning(s, workload, budget_s, named, request.max_envs, t0)
        t.start()
        with s.open(cells=0):
            t.search()
    if t.decision is not None:
        print("\n".join(lines(t.decision, t.profile)))
    if s.view is not None:
        print(f"\nreport: {os.path.join(s.path, 'index.html')}  decision: {os.path.join(s.path, TUNE_JSON)}")
    apart = t.clock.apart_s()
    print(f"rlbench tune: {t.elapsed():.0f} s of the {budget_s:.0f} s budget used"
          + (f" (and {apart:.0f} s apart from it: building adapter environments, calibrating this machine)"
             if apart >= 0.5 else ""), file=sys.stderr)
    return s.exit_code(allow_errors=True) or (0 if t.decision and t.decision.winner else 1), s.path


class Tuning:
    """One tune between its stages, so that however the search ends (converged, out of budget, a signal, a full
    disk) the decision is made from what was measured. A resumed tune reads its tune.json (rlbench.tuning.state):
    the same profile, calibration and space, the budget it had left, and its rows, from which the search retraces
    its path. The calibration's time is kept apart from the budget's (self.clock)."""

    def __init__(self, s, workload, budget_s: float, named: list, max_envs: int, t0: float):
        self.s, self.workload, self.budget_s, self.named, self.t0 = s, workload, budget_s, named, t0
        self.given_max_envs = max_envs
        self.cpus = s.cluster.cpus if s.cluster else cpus_here()
        self.where = f"nodes of class {s.cluster.class_id} ({_machine(s.cluster)})" if s.cluster else "this machine"
        # the calibration read, once it is (tune.json's null: a resumed tune calibrates what the cache lacks)
        self.calibration, self.decision, self.measurer, self.rows_before = None, None, None, []

    def start(self) -> None:
        """What the search needs before the folder opens: the earlier session's state (a resume), the env's
        profile (its own process, or the one kept), the space and the adapters that can run in it (none: a usage
        error, nothing written)."""
        s, workload = self.s, self.workload
        self.earlier = read_state(s.path) if s.resuming else None
        earlier = self.earlier
        self.clock = Clock(self.t0, used_before(earlier, s.path), earlier.calibration_s if earlier else 0.0)
        if earlier is not None and earlier.profile is not None:
            self.profile = earlier.profile
        else:
            print(f"rlbench tune: profiling {label(workload)} in its own process", file=sys.stderr)
            self.profile = EnvProfile.from_json(profile_env(workload))
        self.max_envs = self.given_max_envs or default_max_envs(self.profile)
        self.space = Space(workload, self.named, self.max_envs, self.cpus, self.profile)
        sizes = probe_sizes(self.cpus, self.max_envs, self.profile)
        self.runnable = [a for a in self.space.adapters if any(self.space.settings(a, n) for n in sizes)]
        if not self.runnable:
            raise UsageError(f"no adapter can run {workload.env_id} here: "
                             + "; ".join(f"{x.adapter}: {x.reason}" for x in self.space.left[:6]))
        # its measurer is the sweep's, once the folder is open (a signal before that ends a search never begun)
        self.found = Search(self.space, None, self.budget_s - report_s(self.budget_s), self.profile, None,
                            self.cpus, memory_mb=available_mb())
        s.at_end(self.end)

    def elapsed(self) -> float:
        """The budget used: from this tune's first start, a resumed tune's earlier sessions included, the
        calibration's time left out."""
        return self.clock.elapsed()

    def search(self) -> None:
        """Prepare the adapters' environments, calibrate what this machine has not seen, search."""
        s = self.s
        probes = tuple(cell for a in self.runnable for n in probe_sizes(self.cpus, self.max_envs, self.profile)
                       for _, cell in self.space.probe_setting(a, n))
        with self.clock.apart():   # an adapter environment's first build is once per machine, as the calibration
            envs = s.prepare(Suite("tune", None, None, s.job.settings, probes))
        kept = {(r.cell_id, r.repeat): r for r in ResultSet.load(s.path).runs
                if r.status != "lost" and not r.profiled}
        self.rows_before = sorted(kept)
        measurer = SweepMeasurer(s.run_id, s.job.settings, s.path, envs, cluster=s.cluster, kept=kept,
                                 clock=self.clock.elapsed, open_s=float(self.profile.doc.get("build_s") or 0.0),
                                 step_s=units.cost_s_per_step(self.profile), cpus=self.cpus)
        self.found.measurer = self.measurer = measurer
        if self.earlier is not None and self.earlier.calibration is not None:
            self.calibration = self.earlier.calibration
            measurer.learn({a: self.calibration.adapters.wall_s(a) for a in self.runnable})
        elif self.profile.jax:
            self.calibration = not_calibrated("a JAX env: the calibration measures CPU strategies on a CPU env")
        elif s.cluster is not None:
            self.calibration = not_calibrated("on a cluster: the calibration is of this machine")
        else:
            before = self.clock.apart_s()
            with self.clock.apart():   # once per machine: not the user's budget
                found = calibrate_here(self.runnable, self.cpus, self.max_envs, envs, measurer, s.path)
            self.calibration = found.timed(round(self.clock.apart_s() - before, 2))
            print(f"rlbench tune: calibration: {self.calibration_sentence()}", file=sys.stderr, flush=True)
        self.found.calibration = self.calibration.adapters
        write_atomic(os.path.join(s.path, TUNE_JSON), self.record(None))  # a tune killed from here on resumes
        self.found.go()

    def end(self, outcome) -> tuple:
        """The decision on what was measured, however the search ended: (env.json's fields, {tune.json})."""
        search, used_s = self.found, self.elapsed()
        results = ResultSet.load(self.s.path)
        cut = outcome.interrupted or outcome.store_failed
        if cut:
            for row in self.measurer.missed(results) if self.measurer else ():
                if row.cell_id in search.by_id:  # else a resumed tune's kept row its path had not reached yet
                    search.take(search.by_id[row.cell_id], row)
            search.stop(f"interrupted after {used_s:.0f} s ({outcome.interrupted})" if outcome.interrupted
                        else f"stopped after {used_s:.0f} s: {outcome.store_failed}")
        self.decision = decide(search, results, self.profile, self.max_envs,
                               label=label(self.workload), where=self.where, stop_reason=search.stop_reason,
                               interrupted=search.stop_reason if cut else "", budget_s=self.budget_s, used_s=used_s,
                               calibration=self.calibration_sentence(), calibration_s=round(self.clock.apart_s(), 2))
        return {"tune": self.decision, "cells": len(search.candidates)}, {TUNE_JSON: self.record(self.decision)}

    def calibration_sentence(self) -> str:
        seconds = self.calibration.seconds if self.calibration and self.calibration.seconds is not None else None
        return sentence(self.calibration, self.budget_s, self.clock.apart_s() if seconds is None else seconds)

    def record(self, decision) -> str:
        """tune.json (rlbench.tuning.state.TuneState): the profile, the calibration it read, every candidate and its
        fate, what could not race, and the decision with the search's trace (every round: what was added and why,
        predicted and measured rates, drops with p-values, prunes with predictions); written as the search
        starts (no decision yet: what a resume reads if the tune is killed) and at its end. used_s is the
        budget's (the calibration's time apart: calibration_s, every session's)."""
        search = self.found
        return TuneState(self.workload, self.budget_s, self.elapsed(), self.max_envs, self.s.job.settings,
                         self.profile, self.calibration, round(self.clock.apart_s(), 2), search.stop_reason,
                         search.converged, tuple(self.rows_before),
                         tuple(CandidateRecord.of(c) for c in search.candidates), tuple(search.space.left),
                         decision).to_json()


def _address(request) -> str:
    if not request.cluster:
        return ""
    from rlbench.planning.suite import parse_settings
    return parse_settings("command line", {"cluster": request.cluster}, names={"cluster": "--cluster"}).cluster


def _machine(cluster) -> str:
    fp = cluster.fingerprint
    return f"{len(cluster.nodes)} x {fp.get('cpu_model')}, {cluster.cpus} cores, {fp.get('ram_gb')} GB"


def profile_env(workload) -> dict:
    """The env profile, from its own process (rlbench.tuning.profile), killed with its children if it
    outlives PROFILE_TIMEOUT_S."""
    cmd = [sys.executable, "-m", "rlbench.tuning.profile", json.dumps({"workload": workload.to_dict(), "seconds": 1.0})]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=PROFILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        raise UsageError(f"the env profile of {workload.env_id} did not finish in {PROFILE_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        last = (err.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"the env profile of {workload.env_id} failed: {last}")
    return json.loads(out.strip().splitlines()[-1])


def prepare(adapters) -> dict:
    """Adapter environments of the adapters named to race (built once, cached)."""
    from rlbench.running import adapter_envs
    return adapter_envs.prepare({registry.get(a) for a in adapters}, build=True)
