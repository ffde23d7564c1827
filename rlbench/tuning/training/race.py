"""The race `rlbench tune --train` runs, on the normal protocol (every training run a fresh process, each seed a
repeat of its cell, seed = the repeat's index, every row in results.jsonl as it finishes), under a budget.

With a target return R (time to R: the objective a user who trains asks about):
 1. every configuration trains once (seed 0) until it reaches R or its cap: the first runs have what the budget
    allows, each later one at most CAP_FACTOR x the fastest time to R so far (a run that slow cannot be within
    1.2x of it on its median: it is censored, "did not reach R in X s", and stops costing the budget);
 2. the finalists, every configuration within FINALIST_FACTOR of the fastest seed-0 time (at most FINALISTS,
    fastest first), train on seeds 1 .. N-1, interleaved seed by seed, each capped at CAP_FACTOR x the
    fastest median;
 3. the winner is the finalist with the lowest median time to R over its seeds (a censored seed counts as its
    cap: a lower bound, so a censored median is never flattered); the runner-up is told apart only when the
    two medians' CIs do not overlap.
Without a target (training env steps/s with learning checked): every configuration trains for one window; the
fastest FINALISTS whose return moved (return_mean above return_first) train on the other seeds; the winner is the
highest median rate over seeds among those that learned.

The measurer runs real cells (rlbench.tuning.measure.SweepMeasurer); tests give a simulated one."""
import math
from dataclasses import dataclass, field, replace

import numpy as np

from rlbench.results.stats import summarize

CAP_FACTOR = 2.0        # a run's cap: this many times the fastest time to R so far
FINALIST_FACTOR = 1.5   # seed 0 within this of the fastest: a finalist (seeds vary by more than 1.2x)
FINALISTS = 3
RESERVE_SHARE = 0.35    # of the budget, what the first pass leaves for the finalists' seeds
MIN_CAP_S = 5.0         # a run given less than this to train is not started (the budget is spent)
SETUP_GUESS_S = 8.0     # a training process's start before its first row tells (imports, envs, a compile)
WINDOW_SHARE = 0.5      # without a target: what the first pass's windows may take of the budget, in all
WINDOW_S = (5.0, 60.0)  # ... each window within these bounds


@dataclass
class Entry:
    """One configuration in the race and its rows so far (one per seed)."""
    cfg: object                                # rlbench.tuning.training.space.Config
    rows: list = field(default_factory=list)   # its rows, seed order
    caps: list = field(default_factory=list)   # each run's training cap, s
    status: str = "waiting"                    # waiting | screened | finalist | censored | failed | budget | flat
    why: str = ""

    @property
    def cell(self):
        return self.cfg.cell

    @property
    def ok_rows(self) -> list:
        return [r for r in self.rows if r.ok]

    def times(self) -> list:
        """Time to R per seed run: the row's time, or None where it did not reach R (censored at its cap)."""
        return [_num(r.get("time_to_target_s")) if r.ok else None for r in self.rows]

    def counted(self) -> list:
        """Each seed's time with a censored one counted as its cap (a lower bound)."""
        return [t if t is not None else cap for t, cap in zip(self.times(), self.caps)]

    def median_time(self):
        values = self.counted()
        return float(np.median(values)) if values and any(t is not None for t in self.times()) else None

    def rates(self) -> list:
        return [float(r.steps_per_s) for r in self.ok_rows if r.steps_per_s]

    def median_rate(self):
        return float(np.median(self.rates())) if self.rates() else None

    def learned(self) -> bool:
        """Its return moved: the last mean return above the first, in every ok run."""
        pairs = [(_num(r.get("return_first")), _num(r.get("return_mean"))) for r in self.ok_rows]
        return bool(pairs) and all(a is not None and b is not None and b > a for a, b in pairs)

    def setup_s(self):
        values = [_num(r.get("setup_s")) for r in self.ok_rows]
        values = [v for v in values if v is not None]
        return float(np.median(values)) if values else None


def _alike(cell) -> tuple:
    """The learner and the device it trains on."""
    return cell.adapter, cell.workload.policy.device_label


def _num(value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


class TrainRace:
    def __init__(self, configs, measurer, deadline_s: float, seeds: int, target, clock, say=print):
        """configs: rlbench.tuning.training.space.Config, in the order to try; measurer.run(cells, level, admit) ->
        rows (rlbench.tuning.measure.SweepMeasurer); clock() -> the budget used, s; deadline_s: the budget the
        race may use; target: R, or None (the rate objective)."""
        self.entries = [Entry(c) for c in interleaved(configs)]
        self.measurer, self.deadline_s, self.seeds, self.target = measurer, deadline_s, seeds, target
        self.clock, self.say = clock, say
        self.stop_reason = ""
        self.setups = []   # each training process's setup_s so far

    # -- the budget ----------------------------------------------------------------------------------
    def left_s(self) -> float:
        return self.deadline_s - self.clock()

    def setup_guess(self) -> float:
        return float(np.median(self.setups)) + 1.0 if self.setups else SETUP_GUESS_S

    def cap_for(self, keep_s: float, best) -> float:
        """The training cap a new run gets: what the budget leaves beyond `keep_s` and the process's start
        (less than MIN_CAP_S: 0, the budget is spent), at most CAP_FACTOR x `best` (the fastest time so far, None:
        none yet) but never below MIN_CAP_S."""
        cap = self.left_s() - keep_s - self.setup_guess()
        if cap < MIN_CAP_S:
            return 0.0
        return min(cap, max(CAP_FACTOR * best, MIN_CAP_S)) if best is not None else cap

    # -- running -------------------------------------------------------------------------------------
    def train(self, entry, seed: int, cap_s: float):
        """One more seed of the entry (repeat `seed`), its training capped at cap_s; its row."""
        cell = replace(entry.cell, protocol=_with(entry.cell.protocol, duration_s=round(cap_s, 1),
                                                  timeout_s=round(cap_s + 120 + 2 * self.setup_guess(), 1)))
        rows = self.measurer.run([cell], seed + 1, lambda _cell: True)
        row = next((r for r in rows if r.cell_id == entry.cell.cell_id and r.repeat == seed), None)
        if row is None:
            return None
        entry.rows.append(row)
        entry.caps.append(cap_s)
        if row.ok and _num(row.get("setup_s")) is not None:
            self.setups.append(float(row.get("setup_s")))
        self.say(self.describe(entry, row))
        return row

    def describe(self, entry, row) -> str:
        if not row.ok:
            return f"  {entry.cfg.config}: seed {row.repeat}: {row.status}: {(row.error or '')[:120]}"
        rate = f"{float(row.steps_per_s):,.0f} env steps/s"
        if self.target is None:
            return f"  {entry.cfg.config}: seed {row.repeat}: {rate}, return {row.get('return_mean')}"
        t = _num(row.get("time_to_target_s"))
        reached = f"reached {self.target:g} in {t:.1f} s" if t is not None else \
            f"did not reach {self.target:g} in {entry.caps[-1]:.0f} s (return {_num(row.get('return_mean'))})"
        return f"  {entry.cfg.config}: seed {row.repeat}: {reached}, {rate}"

    def go(self) -> None:
        if self.target is None:
            self.first_pass_rate()
            self.seeds_pass(self.rate_finalists(), lambda e: self.window_s)
        else:
            cap = lambda e: self.cap_for(0.0, self.best_median())  # noqa: E731
            self.first_pass_target(RESERVE_SHARE * self.deadline_s)
            self.seeds_pass(self.target_finalists(), cap)
            # what the budget leaves after the finalists' seeds: the configurations the first pass did not reach,
            # and the seeds of any that joins the finalists
            self.first_pass_target(0.0)
            self.seeds_pass(self.target_finalists(), cap)
        for entry in (e for e in self.entries if e.status == "waiting"):
            entry.status, entry.why = "budget", "the budget ran out before it trained"
        if not self.stop_reason:
            self.stop_reason = "every finalist trained on every seed"

    def first_pass_target(self, reserve: float) -> None:
        """Seed 0 of every configuration still waiting, in order, while the budget beyond `reserve` lasts."""
        for entry in (e for e in self.entries if e.status == "waiting"):
            cap = self.cap_for(reserve, self.best_first())
            if cap < MIN_CAP_S:
                self.stop_reason = "the budget ran out in the first pass"
                return
            row = self.train(entry, 0, cap)
            self.judge_first(entry, row, cap)
            self.unsupported_alike(entry, row)
        if self.stop_reason == "the budget ran out in the first pass":
            self.stop_reason = ""   # a later pass reached every one

    def judge_first(self, entry, row, cap) -> None:
        if row is None or not row.ok:
            entry.status = "failed"
            entry.why = (row.status + ": " + (row.error or "")[:200]) if row is not None else "no row"
        elif entry.times()[0] is None:
            entry.status = "censored"
            entry.why = f"did not reach {self.target:g} in {cap:.0f} s of training (seed 0)"
        else:
            entry.status = "screened"

    def unsupported_alike(self, entry, row) -> None:
        """A configuration that cannot open (no CUDA device, no GPU backend) cannot at another size or setting either:
        what depends on the configuration its learner's supports() refused before the race, so what is left is where
        it runs. Those of the same learner and device still waiting fail with its reason, unrun."""
        if row is None or row.status != "unsupported":
            return
        alike = _alike(entry.cell)
        for e in self.entries:
            if e.status == "waiting" and _alike(e.cell) == alike:
                e.status, e.why = "failed", f"unsupported (as {entry.cfg.config}): {(row.error or '')[:200]}"

    def best_first(self):
        """The fastest seed-0 time to R so far (None: none reached it)."""
        times = [e.times()[0] for e in self.entries if e.rows and e.times()[0] is not None]
        return min(times) if times else None

    def target_finalists(self) -> list:
        best = self.best_first()
        if best is None:
            return []
        near = sorted((e for e in self.entries if e.status in ("screened", "finalist")
                       and e.times()[0] <= FINALIST_FACTOR * best), key=lambda e: e.times()[0])
        for e in near[FINALISTS:]:
            e.why = e.why or f"seed 0 within {FINALIST_FACTOR:g}x of the fastest, but {FINALISTS} faster ones went on"
        for e in (e for e in self.entries if e.status == "screened" and e not in near):
            e.why = f"seed 0 took {e.times()[0]:.1f} s, over {FINALIST_FACTOR:g}x the fastest ({best:.1f} s)"
        return near[:FINALISTS]

    def best_median(self):
        medians = [e.median_time() for e in self.entries if e.status == "finalist" and e.median_time() is not None]
        return min(medians) if medians else self.best_first()

    def first_pass_rate(self) -> None:
        share = WINDOW_SHARE * self.deadline_s / max(len(self.entries), 1) - SETUP_GUESS_S
        self.window_s = min(max(share, WINDOW_S[0]), WINDOW_S[1])
        for entry in self.entries:
            if self.left_s() - self.setup_guess() - self.window_s < RESERVE_SHARE * self.deadline_s * 0.5:
                entry.status, entry.why = "budget", "the budget ran out before it trained"
                self.stop_reason = self.stop_reason or "the budget ran out in the first pass"
                continue
            row = self.train(entry, 0, self.window_s)
            self.unsupported_alike(entry, row)
            if row is None or not row.ok:
                entry.status = "failed"
                entry.why = (row.status + ": " + (row.error or "")[:200]) if row is not None else "no row"
            elif not entry.learned():
                entry.status = "flat"
                entry.why = (f"its return did not move in {self.window_s:.0f} s ({_num(row.get('return_first'))} -> "
                             f"{_num(row.get('return_mean'))}): its rate is not a training rate")
            else:
                entry.status = "screened"

    def rate_finalists(self) -> list:
        ranked = sorted((e for e in self.entries if e.status == "screened"), key=lambda e: -e.median_rate())
        for e in ranked[FINALISTS:]:
            e.why = f"seed 0 at {e.median_rate():,.0f} env steps/s, behind the {FINALISTS} fastest"
        return ranked[:FINALISTS]

    def seeds_pass(self, finalists, cap_of) -> None:
        for e in finalists:
            e.status = "finalist"
        for seed in range(1, self.seeds):
            for entry in (e for e in finalists if len(e.rows) == seed):
                cap = cap_of(entry)
                if cap < MIN_CAP_S:
                    self.stop_reason = f"the budget ran out at seed {seed}"
                    return
                self.train(entry, seed, cap)

    # -- the answer ----------------------------------------------------------------------------------
    def winner(self):
        """(the winner, the runner-up) among the finalists: with a target, the lowest median time to R over the
        most seeds any finalist has; without one, the highest median rate. (None, None) without a finalist."""
        finalists = [e for e in self.entries if e.status == "finalist" and e.ok_rows]
        if not finalists:
            return None, None
        most = max(len(e.rows) for e in finalists)
        full = [e for e in finalists if len(e.rows) == most]
        if self.target is None:
            ranked = sorted(full, key=lambda e: -e.median_rate())
        else:
            ranked = sorted((e for e in full if e.median_time() is not None), key=lambda e: e.median_time())
        rest = sorted((e for e in finalists if e not in ranked[:1]),
                      key=lambda e: (e.median_time() or math.inf) if self.target is not None else -e.median_rate())
        return (ranked[0] if ranked else None), (rest[0] if rest else None)

    @staticmethod
    def summary(values):
        return summarize([v for v in values if v is not None])


def interleaved(configs) -> list:
    """The order configurations are tried in, so that a budget that ends the first pass early cuts every learner
    alike: each learner's configurations in turn (its own in the space's order: sizes, then settings)."""
    by_learner = {}
    for c in configs:
        by_learner.setdefault(c.cell.adapter, []).append(c)
    queues = list(by_learner.values())
    out = []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def _with(protocol: tuple, **values) -> tuple:
    """A cell's own protocol pairs with these set."""
    return tuple(sorted({**dict(protocol), **values}.items()))
