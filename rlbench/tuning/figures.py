"""The calibration's figures, typed where they are born: a `Figure` per (adapter, num_envs) as one calibration
cell left it (its best setting's rate, or why it failed), and `Figures`, every adapter's, with what they say of
a strategy however the env costs (its ceiling, its workers, its longest job, why it has no prediction). The
machine's cache file and tune.json keep them as JSON (adapter -> num_envs as a string -> fields, None fields left
out), read back into these types."""
from dataclasses import asdict, dataclass, field, fields
from typing import Mapping, Optional

HEADROOM = 2.0       # a strategy's ceiling: this times its best calibrated rate (larger num_envs amortise more)


@dataclass(frozen=True)
class Figure:
    """One size of one adapter: the fastest setting's rate and options with the most workers any setting ran and
    the longest job (both bound what its settings may do); a failure has no rate, its status and reason (a
    timeout, the bound it ran under). `code`: the adapter's code it was measured under (calibrate.code_of);
    `measured_at` and `by`: when and by which command it was cached."""
    steps_per_s: Optional[float] = None
    workers: int = 1
    options: Mapping = field(default_factory=dict)
    wall_s: Optional[float] = None
    code: Optional[str] = None
    status: Optional[str] = None
    reason: Optional[str] = None
    bound_s: Optional[float] = None
    measured_at: Optional[float] = None
    by: Optional[str] = None

    @property
    def ran(self) -> bool:
        return bool(self.steps_per_s)

    def to_json(self) -> dict:
        """None fields left out (a rate's None kept: a failure says it has none); a failure has no workers or
        options of its own."""
        doc = {k: v for k, v in asdict(self).items() if v is not None or k == "steps_per_s"}
        if not self.ran:
            doc.pop("workers"), doc.pop("options")
        return doc

    @classmethod
    def from_json(cls, doc: dict) -> "Figure":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in doc.items() if k in known})


class Figures(Mapping):
    """adapter -> {num_envs: Figure}: the calibration of some adapters on this machine."""

    def __init__(self, by_adapter: Mapping = None):
        self._by = {a: dict(sorted(by_n.items())) for a, by_n in (by_adapter or {}).items()}

    def __getitem__(self, adapter: str) -> dict:
        return self._by[adapter]

    def __iter__(self):
        return iter(self._by)

    def __len__(self) -> int:
        return len(self._by)

    def __eq__(self, other) -> bool:
        return isinstance(other, Figures) and self._by == other._by

    def __repr__(self) -> str:
        return f"Figures({self._by!r})"

    def at(self, adapter: str, num_envs: int) -> Optional[Figure]:
        return self._by.get(adapter, {}).get(int(num_envs))

    def ceiling(self, adapter: str) -> Optional[float]:
        """The most env steps/s this strategy is expected to reach on any env here: HEADROOM times its best
        calibrated rate on the zero-cost env; None when it was not calibrated."""
        rates = [f.steps_per_s for f in self._by.get(adapter, {}).values() if f.ran]
        return HEADROOM * max(rates) if rates else None

    def workers_at(self, adapter: str, num_envs: int, cpus: int) -> int:
        """How many processes step its envs at num_envs: one per env where the calibration saw one per env,
        else what it saw (at most the cores); the cores when not calibrated."""
        seen = {n: f for n, f in self._by.get(adapter, {}).items() if f.ran}
        if not seen:
            return cpus
        per_env = any(n > 1 for n in seen) and all(int(f.workers) >= n for n, f in seen.items())
        return num_envs if per_env else max(int(f.workers) for f in seen.values())

    def wall_s(self, adapter: str) -> Optional[float]:
        """The longest calibration job of this adapter (seconds), None when none was timed."""
        walls = [f.wall_s for f in self._by.get(adapter, {}).values() if f.wall_s]
        return max(walls) if walls else None

    def failure(self, adapter: str) -> Optional[str]:
        """Why the calibration gives this adapter no prediction though it ran it ('timeout: no result after 10s;
        ...'): no size gave a rate; None when one did, or when it was never calibrated."""
        seen = self._by.get(adapter) or {}
        if not seen or any(f.ran for f in seen.values()):
            return None
        f = next(iter(seen.values()))
        return f"{f.status or 'failed'}: {f.reason or 'no rate'}"

    def merged(self, other: "Figures") -> "Figures":
        """These figures with `other`'s sizes over them, adapter by adapter."""
        out = {a: dict(by_n) for a, by_n in self._by.items()}
        for a, by_n in other.items():
            out[a] = {**out.get(a, {}), **by_n}
        return Figures(out)

    def only(self, adapters) -> "Figures":
        return Figures({a: self._by[a] for a in adapters if a in self._by})

    def to_json(self) -> dict:
        return {a: {str(n): f.to_json() for n, f in by_n.items()} for a, by_n in self._by.items()}

    @classmethod
    def from_json(cls, doc: Mapping) -> "Figures":
        return cls({a: {int(n): Figure.from_json(f) for n, f in by_n.items()} for a, by_n in (doc or {}).items()})
