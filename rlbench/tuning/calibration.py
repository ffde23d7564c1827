"""This machine's calibration as one tune reads it (tune.json's "calibration"): from the cache, or measured now
apart from the budget (rlbench.tuning.clock), which strategies it gives no prediction and why, and the sentence
the console, the decision and the page say of it, so a user can tell a first tune's answer from a later one's."""
import os
import sys
from dataclasses import dataclass, field, replace
from typing import Mapping, Optional

from rlbench.results.model import Run
from rlbench.tuning import calibrate
from rlbench.tuning.figures import Figures


@dataclass(frozen=True)
class Calibration:
    """The calibration one tune read (tune.json's "calibration"): the figures (`adapters`), where they are cached,
    the sizes, which adapters were measured now and which came from the cache (when, by which command), those it
    gives no prediction with the reason, the cells' bounds, and its seconds (every session's); a tune that reads
    none (a JAX env, a cluster) says why (`why_none`, no path)."""
    adapters: Figures = field(default_factory=Figures)
    path: Optional[str] = None
    sizes: tuple = ()
    measured_now: tuple = ()
    cached: tuple = ()
    cached_at: Optional[float] = None
    cached_by: tuple = ()
    failed: Mapping = field(default_factory=dict)
    bounds_s: Mapping = field(default_factory=dict)
    why_none: Optional[str] = None
    seconds: Optional[float] = None

    def to_json(self) -> dict:
        doc = {"path": self.path, "sizes": list(self.sizes), "measured_now": list(self.measured_now)}
        if self.why_none is not None:
            return {**doc, "adapters": self.adapters.to_json(), "why_none": self.why_none}
        doc.update(cached=list(self.cached), cached_at=self.cached_at, cached_by=list(self.cached_by),
                   failed=dict(self.failed), bounds_s=dict(self.bounds_s), adapters=self.adapters.to_json())
        return doc if self.seconds is None else {**doc, "seconds": self.seconds}

    @classmethod
    def from_json(cls, doc: dict) -> "Calibration":
        return cls(Figures.from_json(doc.get("adapters")), doc.get("path"), tuple(doc.get("sizes") or ()),
                   tuple(doc.get("measured_now") or ()), tuple(doc.get("cached") or ()), doc.get("cached_at"),
                   tuple(doc.get("cached_by") or ()), dict(doc.get("failed") or {}), dict(doc.get("bounds_s") or {}),
                   doc.get("why_none"), doc.get("seconds"))

    def timed(self, seconds: float) -> "Calibration":
        return replace(self, seconds=seconds)


def not_calibrated(why: str) -> Calibration:
    """The record of a tune that reads no calibration (a JAX env's adapters; a cluster's nodes), and why."""
    return Calibration(why_none=why)


def calibrate_here(adapters, cpus, max_envs, envs, measurer, out_dir, stream=None) -> Calibration:
    """This machine's calibration of these adapters: reused from the cache, else measured now in the run
    folder's calibration/, each cell within its bound (calibrate.cell_timeout_s), nothing of it charged to the
    budget. A strategy whose cells all fail or time out is kept with the reason and raced without a
    prediction (never pruned for lacking one)."""
    stream = stream or sys.stderr
    ns = calibrate.sizes(cpus, max_envs)
    cell_s, startup_s = calibrate.bounds()

    def announce(todo):
        print(f"rlbench tune: calibrating {len(todo)} strategies on this machine, once: cached for later tunes, "
              f"not counted in the budget (`rlbench calibrate` does it ahead); each cell within {cell_s:g} s "
              f"({cell_s + startup_s:g} s for one that starts a Ray cluster)", file=stream, flush=True)

    figures, path, rows = calibrate.calibrate(adapters, ns, envs, out_dir=os.path.join(out_dir, "calibration"),
                                              announce=announce, by="rlbench tune")
    measurer.learn({a: figures.wall_s(a) for a in adapters})
    out = record(figures, path, ns, rows, (cell_s, startup_s))
    for adapter, why in out.failed.items():
        print(f"rlbench tune: no calibration of {adapter} ({why}): it races without a prediction",
              file=stream, flush=True)
    return out


def record(figures: Figures, path: str, ns, rows, bounds: tuple) -> Calibration:
    """The calibration read: the figures, which were measured now and which came from the cache (when, by which
    command), each strategy it gives no prediction with the reason, and the cells' bounds."""
    now = sorted({r.adapter for r in map(Run.of, rows)})
    cached = sorted(a for a in figures if a not in now)
    stamps = [f.measured_at for a in cached for f in figures[a].values() if f.measured_at]
    by = sorted({f.by or "" for a in cached for f in figures[a].values()} - {""})
    failed = {a: why for a in sorted(figures) if (why := figures.failure(a))}
    return Calibration(figures, path, tuple(ns), tuple(now), tuple(cached), min(stamps) if stamps else None,
                       tuple(by), failed, {"cell": bounds[0], "startup": bounds[1]})


def sentence(calibration, budget_s: float, seconds: float) -> str:
    """What the calibration was, in a sentence: measured now (its seconds) or cached (when, by whom), never
    counted in the budget, and the strategies raced without a prediction with the reason. `calibration`: the
    Calibration, None when the tune was cut short while calibrating; `seconds`: every session's time on it."""
    apart = f"not counted in the {budget_s:.0f} s budget"
    if calibration is None:
        return f"interrupted after {seconds:.0f} s, {apart}"
    if not calibration.path:
        return f"none ({calibration.why_none or 'not calibrated'})"
    now, cached = calibration.measured_now, calibration.cached
    said = []
    if now:
        said.append(f"{seconds:.0f} s measuring {_strategies(len(now))} now")
    if cached:
        when = calibrate.stamp(calibration.cached_at) if calibration.cached_at else "an earlier run"
        by = f" by {', '.join(calibration.cached_by)}" if calibration.cached_by else ""
        said.append(f"{'the other ' if now else ''}{_strategies(len(cached))} cached from {when}{by}")
    text = f"{' and '.join(said) or 'nothing to calibrate'}, {apart}"
    for adapter, why in calibration.failed.items():
        text += f"; no prediction for {adapter} ({why}): raced without one"
    return text


def _strategies(n: int) -> str:
    return f"{n} strateg{'y' if n == 1 else 'ies'}"
