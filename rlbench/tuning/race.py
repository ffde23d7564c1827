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
from rlbench.tuning.candidates import BASELINES, Left, config

ALPHA = 0.05
FIRST_REPEATS = 2
FINAL_REPEATS = 5
FINALISTS = 3
SPAWN_S = 0.3      # a job's cost beyond its process's own wall time (spawn, reaping, the row's write)
REPORT_S = 15.0    # kept from the budget for the decision and the report
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
    variant: int = 0                             # its place in the adapter's tune_space (0: the first)

    @property
    def median(self) -> float:
        return float(np.median(self.values)) if self.values else 0.0

    @property
    def adapter(self) -> str:
        return self.cell.adapter


class Race:
    def __init__(self, cells, settings, out_dir, run_id, budget_s, envs, stream=None, variants=None):
        self.racers = [Racer(c, variant=(variants or {}).get(c.cell_id, 0)) for c in cells]
        self.reserve_s = 0.0                # kept for the confirmation while racing
        self.settings, self.out_dir, self.run_id, self.envs = settings, out_dir, run_id, envs
        self.budget_s, self.t0 = budget_s, time.monotonic()
        self.deadline = self.t0 + budget_s - REPORT_S
        self.done, self.walls = set(), {}   # (cell_id, repeat, profiled) run; adapter -> job wall times
        self.left_out = []                  # [Left] what was not raced: the candidates' and the budget's
        self.rounds = []                    # per round: repeats, racing before, dropped
        self.stream = stream or sys.stderr

    # -- budget ------------------------------------------------------------------------------------
    def job_s(self, racer_or_cell) -> float:
        """A job's expected wall time: the cell's own so far; else the slowest of its adapter's (Ray and
        JAX start slowly, and a process per env costs more the more envs); else any job's; else a guess."""
        cell = getattr(racer_or_cell, "cell", racer_or_cell)
        own = self.walls.get(cell.cell_id)
        if own:
            return float(np.median(own))
        adapter = self.walls.get(cell.adapter)
        if adapter:
            return max(adapter)
        every = [w for key, ws in self.walls.items() if "/" in key for w in ws]
        s = self.settings
        return float(np.median(every)) if every else 1.5 + s.warmup_s + s.duration_s

    def cost_s(self, racers, repeats: int) -> float:
        return sum(self.job_s(r) * max(repeats - r.repeats, 0) for r in racers)

    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()

    def say(self, text: str) -> None:
        used = time.monotonic() - self.t0
        print(f"rlbench tune: {text} [{_clock(used)} of {_clock(self.budget_s)} used]", file=self.stream, flush=True)

    # -- running -----------------------------------------------------------------------------------
    def run(self, racers, repeats: int) -> bool:
        """Bring every racer to `repeats` repeats, one level at a time (every racer's next repeat, in
        order, before anyone's following one: repeats interleave); False when the deadline stopped it."""
        by_cell = {r.cell.cell_id: r for r in racers}
        for level in range(1, repeats + 1):
            todo = [r for r in racers if r.repeats < level and r.status in ("racing", "finalist")]
            if not todo:
                continue
            if level > 1:  # when the budget runs short, the fastest so far are the ones retested
                todo.sort(key=lambda r: -r.median)
            results = run_sweep(self.run_id, "tune", [r.cell for r in todo], replace(self.settings, repeats=level),
                                self.out_dir, envs=self.envs, done=self.done, admit=self.admit)
            for row in results.rows:
                self.take(by_cell[row["cell_id"]], row)
            if any(r.repeats < level and r.status in ("racing", "finalist") for r in todo):
                return False
        return True

    def admit(self, job) -> bool:
        """A job starts only when it is expected to end before the deadline."""
        return time.monotonic() + self.job_s(job.cell) <= self.deadline - self.reserve_s

    def take(self, racer, row) -> None:
        self.done.add((row["cell_id"], row["repeat"], bool(row.get("profiled"))))
        racer.repeats += 1
        if row.get("wall_s"):
            for key in (racer.cell.cell_id, racer.adapter):
                self.walls.setdefault(key, []).append(float(row["wall_s"]) + SPAWN_S)
        if row["status"] == "ok" and row.get("steps_per_s"):
            racer.values.append(float(row["steps_per_s"]))
        elif racer.status in ("racing", "finalist"):
            racer.status, racer.why = "failed", f"{row['status']}: {(row.get('error') or '')[:200]}"

    # -- the race ----------------------------------------------------------------------------------
    def racing(self) -> list:
        return [r for r in self.racers if r.status == "racing"]

    def baseline(self, racers):
        """The serial loop's best configuration: never dropped, every speedup is over it."""
        serial = [r for r in racers if r.adapter in BASELINES and r.values]
        return max(serial, key=lambda r: r.median, default=None)

    def fit_first_round(self) -> None:
        """Order the racers so that what the budget cuts is the least telling: the serial loop first, then
        every adapter at num_envs 1, the largest and the powers of four, defaults before other settings,
        then the sizes between. What the first round cannot afford by estimate is left out now, and
        accounted for as `budget` (a slow adapter found out while running is cut by the deadline)."""
        racers = self.racing()
        ns = sorted({r.cell.workload.num_envs for r in racers})
        telling = {ns[0], ns[-1]} | {n for n in ns if math.log(n, 4).is_integer()}
        racers.sort(key=lambda r: (not (r.adapter in BASELINES and r.cell.workload.num_envs == ns[0]),
                                   r.cell.workload.num_envs not in telling, r.variant > 0,
                                   r.cell.workload.num_envs, r.adapter))
        allowed, spent, kept = FIRST_SHARE * self.budget_s, 0.0, []
        for r in racers:
            cost = self.job_s(r) * FIRST_REPEATS
            if kept and spent + cost > allowed:
                break
            kept.append(r)
            spent += cost
        for r in racers[len(kept):]:
            self.left_out.append(Left(r.adapter, r.cell.cell_id, "budget",
                                      f"not raced: the budget ({_clock(self.budget_s)}) fits about "
                                      f"{len(kept)} of {len(racers)} configurations"))
        self.racers = kept

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
                         f"{config(leader.cell)} (p={r.p:.3f})")
        return dropped

    def go(self) -> list:
        """Race, then confirm; returns the finalists (best first). While racing, the confirmation's
        expected cost is kept back from the budget."""
        self.fit_first_round()
        repeats, round_no = FIRST_REPEATS, 1
        while self.racing():
            racers = self.racing()
            self.reserve_s = self.cost_s(self.finalists() or racers[:FINALISTS + 1], FINAL_REPEATS)
            self.say(f"round {round_no}: {len(racers)} configurations, {repeats} repeats each, about "
                     f"{_clock(self.cost_s(racers, repeats))} of runs")
            finished = self.run(racers, repeats)
            dropped = self.drop_slower(round_no)
            self.rounds.append({"round": round_no, "repeats": repeats, "racing": len(racers), "dropped": dropped,
                                "finished": finished})
            still = self.racing()
            self.reserve_s = self.cost_s(self.finalists(), FINAL_REPEATS)
            if (not finished or len(still) <= FINALISTS or repeats >= FINAL_REPEATS
                    or self.cost_s(still, repeats + 1) + self.reserve_s > self.remaining_s()):
                break
            repeats, round_no = repeats + 1, round_no + 1
        finalists = self.finalists()
        for r in finalists:
            r.status = "finalist"
        self.reserve_s = 0.0
        if finalists:
            self.say(f"confirming {len(finalists)} configurations with {FINAL_REPEATS} repeats each")
            if not self.run(finalists, FINAL_REPEATS):
                self.say("the budget ended the confirmation early: the finalists have fewer repeats")
        for r in self.racing():
            r.status = "out"
            r.why = ("not retested: the budget ended the race first" if len(r.values) < 2 else
                     f"not significantly slower than the leader (p={r.p:.2f}), but not among the "
                     f"{FINALISTS} fastest confirmed" if r.p == r.p else
                     f"not among the {FINALISTS} fastest confirmed")
        return sorted(finalists, key=lambda r: -r.median)

    def finalists(self) -> list:
        """The FINALISTS fastest still racing (or finalist), and the serial baseline beside them."""
        pool = [r for r in self.racers if r.status in ("racing", "finalist") and r.values]
        # the tested first: a configuration run once (the budget cut its retest) only fills what is left
        top = sorted(pool, key=lambda r: (len(r.values) < FIRST_REPEATS, -r.median))[:FINALISTS]
        base = self.baseline(pool)
        return top + ([base] if base is not None and base not in top else [])
