"""The search `rlbench tune` runs: adaptive, on the normal protocol (every measurement a fresh process, repeats of
what is racing interleaved, the one-sided Welch drop test): probe, climb the neighbourhoods of the top
configurations and of every one within the noise of the leader, race the contenders, until it has converged or
the budget is spent (docs/tune.md). The measurements come from a Measurer (rlbench.tuning.measure runs real cells;
tests give a simulated one).
"""
import math
import sys
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from rlbench.report.format import rate
from rlbench.results.ranking import BASELINES
from rlbench.results.stats import pooled_log_sd, slower_p, summarize
from rlbench.tuning import calibrate
from rlbench.tuning.candidates import MEMORY_SHARE, config
from rlbench.tuning.figures import Figures

ALPHA = 0.05
START_REPEATS = 2    # a new configuration's repeats (the drop test needs two a side)
FINAL_REPEATS = 5    # a contender's, confirmed
MAX_REPEATS = 10     # a tied leader's and runner-up's, at most
TOP = 3              # configurations whose neighbourhoods are searched (and every one within the noise of the leader)
PRUNE_BELOW = 0.5    # pruned: predicted at most this share of the leader's measured rate
PROBE_PER_CORE = (1, 8)  # probe sizes: this many envs per core
JAX_PROBE_SIZES = (2**8, 2**12)  # a JAX env's probe sizes: vmapped, its curve starts where a CPU's ends
# ... at most as many envs as make a unit of JAX_PROBE_UNIT_S by the profile's one-env cost (vmapping only lowers
# it): a probe's 7 units (2 warm-up, 5 timed) then fit tune's 60 s job beside an env that takes ~40 s to open
JAX_PROBE_UNIT_S = 2.0
RESERVE_SHARE = 0.25     # the contenders' confirmation keeps back at most this share of the budget
# a round of new configurations takes at most this share of the budget left beside the reserve, the most promising
# first (promise), so that where a measurement is dear the leaders are still climbed; the rest wait for later rounds
ROUND_SHARE = 1 / 3


@dataclass
class Candidate:
    cell: object
    variant: int                  # its place in its adapter's tune_space (0: the first setting)
    origin: str                   # why it was added: probe, neighbour of X along axis Y, ...
    round: int                    # the round it was added in
    predicted: Optional[float]    # the most env steps/s the calibration allows it, None uncalibrated
    values: list = field(default_factory=list)   # env steps/s of each ok repeat
    repeats: int = 0              # repeats run (ok or not)
    status: str = "racing"        # racing | dropped | failed | pruned | budget | finalist | out
    why: str = ""
    p: float = float("nan")       # one-sided p that it is slower than the leader, at its last test
    round_out: int = 0
    source_median: float = 0.0    # a neighbour's: the rate of the configuration it neighbours
    source: str = ""              # a neighbour's: the cell_id of that configuration
    calibration_failed: bool = False   # no prediction: its calibration ran and failed or timed out

    @property
    def median(self) -> float:
        return float(np.median(self.values)) if self.values else 0.0

    @property
    def adapter(self) -> str:
        return self.cell.adapter

    @property
    def num_envs(self) -> int:
        return self.cell.workload.num_envs

    @property
    def config(self) -> str:
        return config(self.cell)

    @property
    def tested(self) -> bool:
        return len(self.values) >= START_REPEATS


def priority(c) -> tuple:
    """The order jobs run in, so that what the budget cuts is the least promising: retests, the fastest
    first; then new configurations, the neighbours of the fastest first (the climb), then the probes by
    their prediction, highest first. A probe with no prediction because the calibration could not run its
    strategy (EnvPool's and MuJoCo's own backends step only their native envs, not the synthetic one) has no
    bound: it comes first, as the highest (last, a tune of Ant-v4 on 2 cores spent its 3 minutes on the loops
    and vector envs and never ran mujoco-rollout, EnvPool or mujoco-warp). One whose calibration failed or
    timed out comes last: that strategy is slow to start or broken."""
    if c.values:
        return 0, -c.median
    if c.source_median:
        return 1, -c.source_median
    if c.predicted is None:
        return (2, -math.inf) if not c.calibration_failed else (3, 0.0)
    return 2, -c.predicted


PROMISE_STEP = 1.1   # promises within this factor of each other are as good (a bound is no closer than that)


def promise(c) -> float:
    """What a new configuration may reach, on one scale for probes and neighbours, for choosing which a round that
    cannot take all of them takes: a neighbour its source's measured rate, a probe its calibrated bound (no bound:
    unlimited; its calibration failed: nothing), as a step of PROMISE_STEP (so that a bound 0.01% lower does not
    put a strategy behind every other). Unlike `priority`, a strategy not yet measured is not put behind the climb
    of one that was (a slow env's serial loop, flat, would climb while the workers that double it wait)."""
    if c.source_median:
        value = c.source_median
    elif c.predicted is None:
        return -math.inf if c.calibration_failed else math.inf
    else:
        value = c.predicted
    return math.floor(math.log(value) / math.log(PROMISE_STEP)) if value > 0 else -math.inf


def probe_sizes(cpus: int, max_envs: int, profile: dict = None) -> list:
    """Envs per core for CPU envs; a vmapped JAX env's from JAX_PROBE_SIZES, whatever the cores, brought down to
    the power of 2 whose shortest unit (one step of every env: tune sizes scan_T from the profile, units.py) fits
    JAX_PROBE_UNIT_S at the profiled cost of one env's step, costed as if vmapping saved nothing; where both come
    down to that one size, an eighth of it is probed too, so the climb starts from two points of the curve.
    popgym-arcade's pixels with the Flax CNN on 2 CPU cores, 15 ms a step: sized by the profile's own 128-step unit
    the probe was 1 env, and its climb one doubling a round reached 8 envs (100 env steps/s) when the budget ended,
    the best 64 (136); its curve dips at 16 (scan_T=2) before it rises."""
    if profile is not None and profile.jax:
        fits = max_envs
        if profile.step_us > 0:
            fits = 2 ** math.floor(math.log2(max(JAX_PROBE_UNIT_S / (profile.step_us / 1e6), 1.0)))
        sizes = {max(1, min(n, max_envs, fits)) for n in JAX_PROBE_SIZES}
        if len(sizes) == 1:
            sizes.add(max(1, min(fits, max_envs) // 8))
        return sorted(sizes)
    return sorted({max(1, min(k * cpus, max_envs)) for k in PROBE_PER_CORE})


class Search:
    def __init__(self, space, measurer, deadline_s: float, profile, calibration: Figures, cpus: int,
                 memory_mb: float = None, stream=None):
        self.space, self.measurer, self.deadline_s = space, measurer, deadline_s
        self.profile, self.calibration, self.cpus = profile, calibration or Figures(), cpus
        self.memory_mb = memory_mb
        self.stream = stream or sys.stderr
        self.candidates, self.expanded, self.by_id = [], set(), {}
        self.rounds, self.round_no, self.stop_reason, self.converged = [], 0, "", False
        self.reserve_s, self.confirming = 0.0, set()
        self.scouted_round = 0   # the last round that took a scout (`scout`)
        self.started_s = 0.0   # the budget used before the search began (checking and profiling the env)
        self._trace = None

    # -- what there is -------------------------------------------------------------------------------
    def racing(self) -> list:
        return [c for c in self.candidates if c.status == "racing"]

    def ranked(self) -> list:
        """Racing (or, once finished, finalist) configurations with START_REPEATS, fastest first (ties: found
        first)."""
        return sorted((c for c in self.candidates if c.status in ("racing", "finalist") and c.tested),
                      key=lambda c: -c.median)

    def leader(self):
        ranked = self.ranked()
        return ranked[0] if ranked else None

    def baseline(self):
        """The fastest measured serial loop, racing or not: never dropped, every speedup is over it."""
        loops = [c for c in self.candidates if c.adapter in BASELINES and c.tested and c.status != "failed"]
        return max(loops, key=lambda c: c.median, default=None)

    def contenders(self) -> list:
        """The TOP racing configurations by median, one repeat enough (a first repeat far above the leader
        is retested before the leader is confirmed), and the baseline: what is retested and confirmed, and
        whose neighbours are searched."""
        out = self.fastest()
        base = self.baseline()
        return out + ([base] if base is not None and base not in out else [])

    def fastest(self) -> list:
        """The TOP racing configurations by median, one repeat enough."""
        measured = sorted((c for c in self.candidates if c.status in ("racing", "finalist") and c.values),
                          key=lambda c: -c.median)
        return measured[:TOP]

    # -- adding --------------------------------------------------------------------------------------
    def add(self, variant: int, cell, origin: str, source=None):
        """A configuration, unless known: racing, or pruned when predicted below reach or past memory."""
        if cell.cell_id in self.by_id:
            return None
        predicted = self.predict(cell, cell.workload.num_envs)
        c = Candidate(self.space.numbered(cell), variant, origin, self.round_no, predicted,
                      source_median=source.median if source is not None else 0.0,
                      source=source.cell.cell_id if source is not None else "")
        self.by_id[c.cell.cell_id] = c
        self.candidates.append(c)
        unpredicted = self.calibration.failure(cell.adapter) if predicted is None else None
        c.calibration_failed = bool(unpredicted) and not unpredicted.startswith("unsupported")
        said = {"uncalibrated": unpredicted} if unpredicted else {}   # raced without a prediction, and why
        self._log("added").append(self._brief(c, origin=origin, **said))
        lead = self.leader() or self.baseline()
        if cell.adapter in BASELINES:
            return c
        if predicted is not None and lead is not None and predicted < PRUNE_BELOW * lead.median:
            c.status = "pruned"
            c.why = (f"pruned: predicted at most {rate(predicted)} env steps/s ({_prediction(self, c)}), below "
                     f"{PRUNE_BELOW:g}x the leader {lead.config} at {rate(lead.median)}")
        elif self.memory_mb is not None:
            need = calibrate.memory_mb(self.calibration, cell.adapter, cell.workload.num_envs, self.profile, self.cpus)
            if need > MEMORY_SHARE * self.memory_mb:
                c.status = "pruned"
                c.why = (f"pruned: expected to hold {need:.0f} MB, over {MEMORY_SHARE:.0%} of the "
                         f"{self.memory_mb:.0f} MB available")
        if c.status == "pruned":
            self._log("pruned").append(self._brief(c, why=c.why))
        return c

    def predict(self, cell, num_envs: int):
        """The calibration's bound on the cell's configuration at num_envs (None uncalibrated), its policy on
        its device, central or in workers as the adapter keeps it."""
        central = self.space.central(cell.adapter, cell.given_options)
        return calibrate.predict(self.calibration, cell.adapter, num_envs, self.profile, self.cpus,
                                 cell.workload.policy.device_label, central)

    def probe(self, adapters) -> None:
        for name in adapters:
            for n in probe_sizes(self.cpus, self.space.max_envs, self.profile):
                for variant, cell in self.space.probe_setting(name, n):
                    self.add(variant, cell, f"probe: {name} at num_envs={n}")

    def strategy_best(self, adapter: str):
        """An adapter's fastest tested configuration, dropped or not."""
        mine = [c for c in self.candidates if c.adapter == adapter and c.tested and c.status in
                ("racing", "dropped", "finalist", "out")]
        return max(mine, key=lambda c: c.median, default=None)

    def promising(self, best) -> bool:
        """Whether a strategy's climb goes on past its best configuration though the leader is faster: its
        calibrated prediction one step further up still reaches the leader; uncalibrated, while its best
        is the largest num_envs it has tried (its curve still rising) and within PRUNE_BELOW of the leader."""
        lead = self.leader()
        if lead is None or best is lead:
            return True
        predicted = self.predict(best.cell, 2 * best.num_envs)
        if predicted is not None:
            return predicted >= lead.median
        return best.num_envs >= max(self.sizes_measured(best.adapter)) and best.median >= PRUNE_BELOW * lead.median

    def sizes_measured(self, adapter: str) -> list:
        """The num_envs of an adapter's configurations with a repeat: its curve so far."""
        return [c.num_envs for c in self.candidates if c.adapter == adapter and c.values]

    def within_noise(self, c, lead) -> str:
        """Why a tested configuration cannot be told from the leader ('' when it can): it is not significantly
        slower (one-sided Welch test, p >= ALPHA) or its median's 95% CI overlaps the leader's. Two repeats
        cannot order such a pair, so its neighbours may hold the true best (issue 43: rlpyt-cpu at 16 envs,
        0.82x [0.68, 0.98] of the leader with p=0.22, its larger neighbours never tried: the pick was 0.86x of
        the best)."""
        if lead is None or c is lead or not c.tested or not lead.tested:
            return ""
        said = []
        p = slower_p(c.values, lead.values, self.noise_sd())
        if p >= ALPHA:   # NaN: untestable, not within
            said.append(f"not significantly slower, p={p:.2f}")
        mine, theirs = summarize(c.values), summarize(lead.values)
        if mine.ci_high >= theirs.ci_low and theirs.ci_high >= mine.ci_low:   # NaN bounds: no overlap
            said.append("its 95% CI overlaps the leader's")
        return f"within the noise of the leader {lead.config} ({', '.join(said)})" if said else ""

    def expand(self) -> None:
        """Neighbours of the top configurations, of the best serial loop, of every configuration within the
        noise of the leader, and of every strategy's best while it is promising (its climb may still overtake
        the leader), each configuration expanded once; the trace says why each was."""
        lead, base, top = self.leader(), self.baseline(), self.fastest()
        sources = [(c, f"among the {TOP} fastest") for c in top]
        if base is not None and base not in top:
            sources.append((base, "the serial baseline"))
        for c in self.ranked():
            why = self.within_noise(c, lead)
            if why and all(c is not s for s, _ in sources):
                sources.append((c, why))
        for adapter in self.space.adapters:
            best = self.strategy_best(adapter)
            if best is not None and all(best is not s for s, _ in sources) and self.promising(best):
                sources.append((best, "its strategy's best, still promising"))
        for src, why in sources:
            if src.cell.cell_id in self.expanded:
                continue
            self.expanded.add(src.cell.cell_id)
            self._log("expanded").append(self._brief(src, because=why))
            for axis, variant, cell in self.space.neighbours(src.adapter, src.num_envs, src.variant,
                                                             src.cell.given_options,
                                                             src.cell.workload.policy.device_label):
                self.add(variant, cell, f"neighbour of {src.config} along {axis}", src)

    def climb_rank(self, c) -> int:
        """Where a new configuration stands in the climb: 0 up the slope of the leader or of one within its noise
        (more envs where that configuration is its strategy's largest num_envs measured, fewer where its smallest),
        as its neighbour or as a probe of its strategy (a JAX env's two probe sizes are two points of one curve:
        the larger is the climb of the smaller); 1 another of their neighbours; 2 the rest. A serial loop's
        neighbours are no climb (a slow env's flat loop would climb while the workers that double it wait)."""
        lead = self.leader()
        if lead is None or lead.adapter in BASELINES:
            return 2
        if not c.source:
            return 0 if c.adapter == lead.adapter and self.uphill(lead, c) else 2
        src = self.by_id.get(c.source)
        if src is None or src.adapter in BASELINES or src.status not in ("racing", "finalist") \
                or (src is not lead and not self.within_noise(src, lead)):
            return 2
        return 0 if self.uphill(src, c) else 1

    def rank_in_round(self, c) -> int:
        """Where a configuration stands in a round of new ones: one the budget cut after its first repeat that
        measured faster than the leader comes before the climb (-1: its repeat may make it the leader; on a JAX
        env with 20 s, 4096 envs measured once at 2.4x the leader at 256 waited while the leader's climb went
        down to 128, and tune answered 128); the rest by `climb_rank`."""
        lead = self.leader()
        if c.values and (lead is None or c.median > lead.median):
            return -1
        return self.climb_rank(c)

    def uphill(self, src, c) -> bool:
        """Whether c lies past the end of src's strategy's measured curve that src stands at."""
        tried = self.sizes_measured(src.adapter)
        return (c.num_envs > src.num_envs and src.num_envs >= max(tried)) or \
            (c.num_envs < src.num_envs and src.num_envs <= min(tried))

    # -- measuring -----------------------------------------------------------------------------------
    def remaining_s(self) -> float:
        return self.deadline_s - self.measurer.elapsed()

    def cost_s(self, cands, repeats: int) -> float:
        return sum(self.measurer.job_s(c.cell) * max(repeats - c.repeats, 0) for c in cands) / self.measurer.slots

    def admit(self, cell) -> bool:
        """A job starts only when expected to end before the deadline; a new configuration's, only when the
        contenders' confirmation still fits after it, but for the leader's own neighbours (its climb)."""
        lead, c = self.leader(), self.by_id.get(cell.cell_id)
        climb = lead is not None and c is not None and c.source == lead.cell.cell_id
        reserve = 0.0 if cell.cell_id in self.confirming or climb else self.reserve_s
        return self.measurer.job_s(cell) <= self.remaining_s() - reserve

    def fit(self, targets: dict) -> dict:
        """The round's new configurations that fit ROUND_SHARE of the budget left beside the reserve (at least one),
        the most promising first (`promise`: a probe's bound against a neighbour's measured source), the cheaper
        of two as promising first (a slow env's small probe before its large one, so more strategies are seen),
        then the one with the higher calibrated ceiling (the less overhead); but the climb (the neighbours of the leader
        and of those within its noise, up their slopes first: `climb_rank`) before any of them.
        On a driving simulator of 29 ms a step, a probe round of every strategy took 93 s of a 114 s search and no
        leader was climbed (issue 63). What is left out stays racing, untested, for a later round. A probe's promise
        is its calibrated bound, a neighbour's a measured rate, and a bound from the synthetic env sits above any
        rate: on MiniGrid's screen with the CNN (a job ~5 s, 2 cores), 33 probes each bounded at 3.5k
        env steps/s went ahead of the leader's climb round after round, rlpyt at 16 envs (1.58k) never tried 32, and
        the pick was 0.48x the sweep's best (rlpyt at 128 envs)."""
        room = ROUND_SHARE * max(self.remaining_s() - self.reserve_s, 0.0)
        order = sorted(targets.values(), key=lambda t: (self.rank_in_round(t[0]), -promise(t[0]),
                                                        self.measurer.job_s(t[0].cell),
                                                        -(self.calibration.ceiling(t[0].adapter) or 0.0)))
        first = 0 if self.round_no - self.scouted_round >= 2 else 1   # the last round took none: it goes first
        scout = self.scout([c for c, _ in order], order[0][0].adapter if order and first else "")
        if scout is not None:
            order.insert(first, order.pop([c for c, _ in order].index(scout)))
        kept, spent = {}, 0.0
        for c, repeats in order:
            cost = self.cost_s([c], repeats)
            if kept and spent + cost > room:
                continue
            kept[c.cell.cell_id], spent = (c, repeats), spent + cost
            if c is scout:
                self.scouted_round = self.round_no
        if len(kept) < len(targets):
            self._log("deferred").extend(self._brief(c, why=f"the round's share of the budget ({ROUND_SHARE:.2f} of "
                                                            f"the {room / ROUND_SHARE:.0f} s left) is spent")
                                         for cid, (c, _) in targets.items() if cid not in kept)
        return kept

    def scout(self, new: list, other_than: str):
        """The probe a round takes first, or second after the climb's first step where the round before took one
        (`fit`: rounds alternate, as a dear env's rounds have room for one configuration each): the most promising
        probe of a strategy (but other_than) with nothing measured yet, at the num_envs nearest the leader's (the
        larger, with no leader); None when there is none. On highway-env's intersection (43 ms a step, every
        parallel strategy bounded alike) the probe round had room for rlpyt-cpu's two probes, rlpyt-cpu's climb
        took every round after, and gymnasium-async, the sweep's best, was never measured (the pick 0.72x of it)."""
        lead = self.leader()
        target = math.log2(lead.num_envs) if lead is not None else math.inf
        unseen = [c for c in new if not c.source and c.adapter != other_than and not self.sizes_measured(c.adapter)]
        # a library none of whose strategies is measured yet first (rlpyt's four samplers are one library; on
        # intersection the scouts went to three of them, the cheapest jobs, and gymnasium-async waited)
        seen = {self.space.library(c.adapter) for c in self.candidates if c.values}
        seen |= {self.space.library(other_than)} if other_than else set()
        return max(unseen, key=lambda c: (self.space.library(c.adapter) not in seen, promise(c),
                                          -abs(math.log2(c.num_envs) - target) if lead is not None else c.num_envs),
                   default=None)

    def measure(self, targets: dict) -> int:
        """Bring each candidate (cell_id -> (candidate, repeats)) to its repeats, a level at a time (every
        candidate's next repeat before anyone's following one); the number of jobs run."""
        ran = 0
        top = max((t for _, t in targets.values()), default=0)
        for level in range(1, top + 1):
            todo = [c for c, t in targets.values() if t >= level and c.repeats < level and c.status == "racing"]
            if not todo:
                continue
            todo.sort(key=priority)  # when the budget runs short, what it cuts is the least promising
            by_id = {c.cell.cell_id: c for c in todo}
            for row in self.measurer.run([c.cell for c in todo], level, self.admit):
                self.take(by_id[row.cell_id], row)
                ran += 1
            if level == 1:
                self.set_aside_far_below()  # before their second repeat
        return ran

    def take(self, c, row) -> None:
        c.repeats += 1
        if row.status == "ok" and row.steps_per_s:
            c.values.append(float(row.steps_per_s))
        elif c.status == "racing":
            c.status, c.round_out = "failed", self.round_no
            c.why = f"{row.status}: {(row.error or '')[:200]}"

    def set_aside_far_below(self) -> None:
        """A configuration whose first repeat came in below PRUNE_BELOW of the leader is not retested (it
        would have to double to come within reach). The serial loops' configurations never are: the
        baseline is the best of them."""
        lead = self.leader()
        if lead is None:
            return
        for c in self.racing():
            if not c.tested and c.values and c.adapter not in BASELINES and c.median < PRUNE_BELOW * lead.median:
                c.status, c.round_out = "dropped", self.round_no
                c.why = (f"dropped in round {self.round_no} after one repeat: {c.median / lead.median:.2f}x the "
                         f"leader {lead.config}, below {PRUNE_BELOW:g}x")
                self._log("dropped").append(self._brief(c, ratio_to_leader=c.median / lead.median))

    def noise_sd(self) -> float:
        """The repeat-to-repeat spread (log rates) the search's tests assume at least: pooled over every
        configuration it has measured twice or more (rlbench.results.stats.pooled_log_sd)."""
        return pooled_log_sd(c.values for c in self.candidates)

    def drop_slower(self) -> None:
        """Drop what is significantly slower than the leader (one-sided Welch test, p < ALPHA, each side's spread
        at least the search's pooled noise: `noise_sd`)."""
        lead, base = self.leader(), self.baseline()
        if lead is None:
            return
        if base is not None and base.status == "dropped":  # a faster serial loop found: it is the baseline now
            base.status, base.why, base.round_out = "racing", "", 0
        self.set_aside_far_below()
        for c in self.racing():
            if c is lead or c is base or not c.tested:
                continue
            c.p = slower_p(c.values, lead.values, self.noise_sd())
            if c.p < ALPHA:
                c.status, c.round_out = "dropped", self.round_no
                c.why = (f"dropped in round {self.round_no}: {c.median / lead.median:.2f}x the leader "
                         f"{lead.config} (p={c.p:.3f})")
                self._log("dropped").append(self._brief(c, p=c.p, ratio_to_leader=c.median / lead.median))

    # -- rounds ----------------------------------------------------------------------------------------
    def plan(self, exploring: bool = True) -> tuple:
        """(kind, {cell_id: (candidate, repeats)}) of the next round; an empty plan: converged. The search
        comes first (new configurations to START_REPEATS), its confirmation's cost kept back; then the
        contenders are confirmed a repeat a round; then a tie at the top is raced."""
        new = {c.cell.cell_id: (c, START_REPEATS) for c in self.racing() if c.repeats < START_REPEATS}
        if new and exploring:
            return ("probe" if self.round_no <= 2 else "climb"), new
        confirm = {c.cell.cell_id: (c, c.repeats + 1) for c in self.contenders() if c.repeats < FINAL_REPEATS}
        if confirm:
            return "confirm", confirm
        ranked = self.ranked()
        if len(ranked) > 1 and slower_p(ranked[1].values, ranked[0].values, self.noise_sd()) >= ALPHA:
            tied = {c.cell.cell_id: (c, c.repeats + 1) for c in ranked[:2] if c.repeats < MAX_REPEATS}
            if tied:
                return "tie-break", tied
        return "", {}

    def say(self, text: str) -> None:
        from rlbench.running.progress import clock_text
        print(f"rlbench tune: {text} [{clock_text(self.measurer.elapsed())} of {clock_text(self.deadline_s)} for "
              f"measuring]", file=self.stream, flush=True)

    def go(self) -> list:
        """Search until converged or out of budget; the contenders, best first."""
        self.started_s = self.measurer.elapsed()
        sizes = probe_sizes(self.cpus, self.space.max_envs, self.profile)
        # one serial loop goes first, where one can step the env (a JAX env none can: the rest go first), the
        # baseline every speedup is over; the other loop is probed with the rest, by its promise (on highway-env's
        # intersection, 43 ms a step, both loops at both probe sizes took 68 s of a 170 s search)
        loops = [a for a in self.space.adapters if a in BASELINES and any(self.space.settings(a, n) for n in sizes)]
        loops = sorted(loops, key=BASELINES.index)[:1]
        rest = [a for a in self.space.adapters if a not in loops]
        self._start_round()
        self.probe(loops or rest)
        probed_rest, exploring = not loops, True
        while True:
            kind, targets = self.plan(exploring)
            if not kind:
                untested = [c for c in self.racing() if c.repeats < START_REPEATS]
                self.converged = not untested
                self.stop_reason = (
                    f"converged after {self.measurer.elapsed():.0f} s: every neighbour of the top {TOP} "
                    f"configurations, of those within the noise of the leader and of the serial loop tested, "
                    f"pruned or out of range, the contenders confirmed" if self.converged else
                    f"budget spent after {self.measurer.elapsed():.0f} s: the contenders confirmed with what was "
                    f"left, {len(untested)} configurations still to test")
                break
            self.confirming = {cid for cid, (c, _) in targets.items() if c in self.contenders()}
            self.reserve_s = (min(self.cost_s(self.contenders(), FINAL_REPEATS), RESERVE_SHARE * self.deadline_s)
                              if exploring else 0.0)
            if kind in ("probe", "climb"):
                targets = self.fit(targets)
            self._trace.update(kind=kind, configurations=len(targets))
            self.say(f"round {self.round_no} ({kind}): {len(targets)} configurations")
            ran = self.measure(targets)
            self.drop_slower()
            self._end_round()
            if ran == 0 and exploring and kind in ("probe", "climb"):
                exploring = False   # no new configuration fits beside the confirmation: confirm with what is left
                self._start_round()
                continue
            if ran == 0:
                self.stop_reason = (f"budget spent after {self.measurer.elapsed():.0f} s: the next job would "
                                    f"end past the deadline")
                break
            self._start_round()
            if not probed_rest:
                self.probe(rest)
                probed_rest = True
            if exploring:
                self.expand()
        self._end_round(final=True)
        self.finish()
        self.say(self.stop_reason)
        return self.contenders()

    def why_none(self) -> str:
        """Why no configuration has a finished repeat: those run failed (their fates say how), or the budget was
        spent before the first could start, said with where it went and a budget that runs the first round."""
        if any(c.repeats for c in self.candidates) or not self.candidates:
            failed = [c for c in self.candidates if c.status == "failed"]
            return "no configuration completed a repeat" + (
                f": {len(failed)} failed, the first {failed[0].config}: {failed[0].why}" if failed else "")
        first = [c for c in self.candidates if c.round == self.candidates[0].round]
        need_s = self.started_s + self.cost_s(first, START_REPEATS)
        return (f"the budget was spent before a configuration could run: checking and profiling the env took "
                f"{self.started_s:.0f} s of the {self.deadline_s:.0f} s for measuring, and its first round "
                f"({len(first)} configurations, {START_REPEATS} repeats each, every one opening the env again) "
                f"needs about {need_s - self.started_s:.0f} s more: --budget {math.ceil((need_s + 10) / 60)}m "
                f"or more")

    def stop(self, reason: str) -> None:
        """The search cut short (a signal, a full disk): the round under way kept in the trace, every candidate's
        fate set on what was measured."""
        self.stop_reason = reason
        if self._trace is not None:
            self._end_round(final=True)
        self.finish()

    def finish(self) -> None:
        top = set(id(c) for c in self.contenders())
        for c in self.candidates:
            if c.status != "racing":
                continue
            if not c.tested:
                c.status = "budget"
                c.why = (f"not raced to the end: the budget ended the search with {c.repeats} of "
                         f"{START_REPEATS} repeats")
            elif id(c) in top:
                c.status = "finalist"
                c.why = "confirmed among the contenders" if c.repeats >= FINAL_REPEATS else \
                    f"among the contenders ({c.repeats} repeats: the budget ended its confirmation)"
            else:
                c.status = "out"
                c.why = (f"not significantly slower than the leader (p={c.p:.2f}), but not among the {TOP} "
                         "fastest" if c.p == c.p else f"not among the {TOP} fastest")
                if c.cell.cell_id in self.expanded:
                    c.why += "; its neighbourhood searched"

    # -- the trace -----------------------------------------------------------------------------------
    def _start_round(self) -> None:
        self.round_no += 1
        self._trace = {"round": self.round_no, "kind": "", "started_s": round(self.measurer.elapsed(), 2),
                       "added": [], "pruned": [], "dropped": [], "expanded": [], "deferred": []}

    def _log(self, key: str) -> list:
        if self._trace is None:
            self._start_round()
        return self._trace[key]

    def _end_round(self, final: bool = False) -> None:
        t = self._trace
        if t is None or (final and not (t["added"] or t["pruned"] or t["dropped"] or t["kind"])):
            self._trace = None
            return
        lead = self.leader()
        t.update(ended_s=round(self.measurer.elapsed(), 2),
                 leader=self._brief(lead) if lead else None,
                 measured=[self._brief(c) for c in self.candidates if c.repeats and c.status != "pruned"])
        if final:
            t["kind"] = t["kind"] or "found after the last round"
        self.rounds.append(t)
        self._trace = None

    @staticmethod
    def _brief(c, **extra) -> dict:
        return {"cell_id": c.cell.cell_id, "config": c.config, "predicted_max_steps_per_s": c.predicted,
                "steps_per_s_median": c.median if c.values else None, "repeats": c.repeats, **extra}


def _prediction(search, c) -> str:
    top = search.calibration.ceiling(c.adapter)
    us = calibrate.env_us(search.profile) + calibrate.policy_us_per_step(search.profile,
                                                                         c.cell.workload.policy.device_label)
    return (f"its ceiling here {rate(top)} from the calibration, {us:.2f} us of env and policy per step on "
            f"at most {min(search.cpus, c.num_envs)} cores")
