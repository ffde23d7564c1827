"""The search: a race on the normal protocol. Every measurement is a fresh process, and the repeats of
the candidates still racing are interleaved, as in any run. After each round the leader is the highest
median; a candidate is dropped only when it is significantly slower than the leader (one-sided Welch test
on log rates, p < ALPHA, rlbench.results.stats.slower_p); the others get one more repeat. The race ends
when FINALISTS are left, when they have FINAL_REPEATS, or when the racing share of the budget is spent;
then the finalists (and the serial baseline) are confirmed with FINAL_REPEATS each.

The budget is kept by estimating each job's wall time from those already run (per adapter: Ray and JAX
start slowly) and starting no job past the deadline; the configurations that never fit are accounted for
as `budget`.
"""
import math
import sys
import time
from dataclasses import dataclass, field, replace

import numpy as np

from rlbench.results.stats import slower_p
from rlbench.running.progress import _clock
from rlbench.running.sweep import run_sweep
from rlbench.tuning.candidates import BASELINES, Left

ALPHA = 0.05
FIRST_REPEATS = 2
FINAL_REPEATS = 5
FINALISTS = 3
CHUNK = 4          # cells per run_sweep call: the deadline is checked between chunks
FIRST_SHARE = 0.6  # the first round may use this share of the budget (the rest: later rounds, confirmation)


@dataclass
class Racer:
    cell: object
    values: list = field(default_factory=list)   # steps/s of each ok repeat
    repeats: int = 0                             # repeats run (ok or not)
    status: str = "racing"                       # racing | dropped | failed | finalist
    round: int = 0                               # the round it left the race in
    why: str = ""
    p: float = float("nan")

    @property
    def median(self) -> float:
        return float(np.median(self.values)) if self.values else 0.0

    @property
    def adapter(self) -> str:
        return self.cell.adapter


class Race:
    def __init__(self, cells, settings, out_dir, run_id, budget_s, envs, stream=None):
        self.racers = [Racer(c) for c in cells]
        self.settings, self.out_dir, self.run_id, self.envs = settings, out_dir, run_id, envs
        self.budget_s, self.t0 = budget_s, time.monotonic()
        self.deadline = self.t0 + budget_s
        self.done, self.walls = set(), {}   # (cell_id, repeat, profiled) run; adapter -> job wall times
        self.left_out = []                  # [Left] what was not raced: the candidates' and the budget's
        self.rounds = []                    # per round: repeats, racing before, dropped
        self.stream = stream or sys.stderr

    # -- budget ------------------------------------------------------------------------------------
    def job_s(self, adapter: str) -> float:
        """A job's expected wall time: the adapter's own so far, else any adapter's, else a guess."""
        own = self.walls.get(adapter) or [w for ws in self.walls.values() for w in ws]
        s = self.settings
        return float(np.median(own)) if own else 1.5 + s.warmup_s + s.duration_s

    def cost_s(self, racers, repeats: int) -> float:
        return sum(self.job_s(r.adapter) * max(repeats - r.repeats, 0) for r in racers)

    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()

    def say(self, text: str) -> None:
        used = time.monotonic() - self.t0
        print(f"rlbench tune: {text} [{_clock(used)} of {_clock(self.budget_s)} used]", file=self.stream, flush=True)

    # -- running -----------------------------------------------------------------------------------
    def run(self, racers, repeats: int) -> bool:
        """Bring every racer to `repeats` repeats, a chunk of cells at a time, interleaved within the
        chunk; False when the deadline stopped it first."""
        by_cell = {r.cell.cell_id: r for r in racers}
        todo = [r for r in racers if r.repeats < repeats]
        for start in range(0, len(todo), CHUNK):
            chunk = todo[start:start + CHUNK]
            if self.remaining_s() < min(self.job_s(r.adapter) for r in chunk):
                return False
            results = run_sweep(self.run_id, "tune", [r.cell for r in chunk], replace(self.settings, repeats=repeats),
                                self.out_dir, envs=self.envs, done=self.done)
            for row in results.rows:
                racer = by_cell[row["cell_id"]]
                self.done.add((row["cell_id"], row["repeat"], bool(row.get("profiled"))))
                racer.repeats += 1
                if row.get("wall_s"):
                    self.walls.setdefault(racer.adapter, []).append(float(row["wall_s"]))
                if row["status"] == "ok" and row.get("steps_per_s"):
                    racer.values.append(float(row["steps_per_s"]))
                elif racer.status == "racing":
                    racer.status, racer.why = "failed", f"{row['status']}: {(row.get('error') or '')[:200]}"
        return True

    # -- the race ----------------------------------------------------------------------------------
    def racing(self) -> list:
        return [r for r in self.racers if r.status == "racing"]

    def baseline(self, racers):
        """The serial loop's best configuration: never dropped, every speedup is over it."""
        serial = [r for r in racers if r.adapter in BASELINES and r.values]
        return max(serial, key=lambda r: r.median, default=None)

    def fit_first_round(self) -> None:
        """Leave out what the first round cannot afford, the rarest num_envs first (powers of four and
        the extremes are kept longest); what is left out is accounted for as `budget`."""
        allowed = FIRST_SHARE * self.budget_s
        racers = self.racing()
        if self.cost_s(racers, FIRST_REPEATS) <= allowed:
            return
        ns = sorted({r.cell.workload.num_envs for r in racers})
        keep_first = {ns[0], ns[-1]} | {n for n in ns if math.log(n, 4).is_integer()}
        ranked = sorted(racers, key=lambda r: (r.cell.workload.num_envs not in keep_first,
                                               bool(r.cell.given_options), r.cell.workload.num_envs,
                                               r.adapter not in BASELINES))
        kept, spent = [], 0.0
        for r in ranked:
            cost = self.job_s(r.adapter) * FIRST_REPEATS
            if spent + cost <= allowed or (r.adapter in BASELINES and r.cell.workload.num_envs == ns[0]):
                kept.append(r)
                spent += cost
        for r in racers:
            if r not in kept:
                self.racers.remove(r)
                self.left_out.append(Left(r.adapter, r.cell.cell_id, "budget",
                                      f"not raced: the budget ({_clock(self.budget_s)}) fits "
                                      f"{len(kept)} of {len(racers)} configurations"))

    def drop_slower(self, round_no: int) -> int:
        racers = [r for r in self.racing() if r.values]
        if not racers:
            return 0
        leader = max(racers, key=lambda r: r.median)
        keep = self.baseline(racers)
        dropped = 0
        for r in racers:
            if r is leader or r is keep:
                continue
            r.p = slower_p(r.values, leader.values)
            if r.p < ALPHA:
                r.status, r.round, dropped = "dropped", round_no, dropped + 1
                r.why = (f"dropped in round {round_no}: {r.median / leader.median:.2f}x the leader "
                         f"{leader.cell.cell_id} (p={r.p:.3f})")
        return dropped

    def go(self) -> list:
        """Race, then confirm; returns the finalists (best first)."""
        self.fit_first_round()
        repeats, round_no = FIRST_REPEATS, 1
        while self.racing():
            racers = self.racing()
            eta = self.cost_s(racers, repeats)
            self.say(f"round {round_no}: {len(racers)} configurations, {repeats} repeats each, about "
                     f"{_clock(eta)} of runs")
            finished = self.run(racers, repeats)
            dropped = self.drop_slower(round_no)
            self.rounds.append({"round": round_no, "repeats": repeats, "racing": len(racers), "dropped": dropped,
                                "finished": finished})
            still = self.racing()
            reserve = self.cost_s(self.finalists(), FINAL_REPEATS)
            if (not finished or len(still) <= FINALISTS or repeats >= FINAL_REPEATS
                    or self.cost_s(still, repeats + 1) + reserve > self.remaining_s()):
                break
            repeats, round_no = repeats + 1, round_no + 1
        finalists = self.finalists()
        for r in finalists:
            r.status = "finalist"
        if finalists:
            self.say(f"confirming {len(finalists)} configurations with {FINAL_REPEATS} repeats each")
            self.run(finalists, FINAL_REPEATS)
        for r in self.racing():
            r.status, r.why = "out", "not among the fastest when the race ended (not significantly slower)"
        return sorted(finalists, key=lambda r: -r.median)

    def finalists(self) -> list:
        """The FINALISTS fastest still racing (or finalist), and the serial baseline beside them."""
        pool = [r for r in self.racers if r.status in ("racing", "finalist") and r.values]
        top = sorted(pool, key=lambda r: -r.median)[:FINALISTS]
        base = self.baseline(pool)
        return top + ([base] if base is not None and base not in top else [])
