"""The budget's clock of one tune: from its first start (a resumed tune's earlier sessions included), with the
time spent apart from the search left out. The machine's calibration runs apart: it is once per machine, so
charging it to the budget made a first tune worse than every later one (issue 43: 101 s of a 171 s tune)."""
import time
from contextlib import contextmanager


class Clock:
    def __init__(self, start: float, used_before: float = 0.0, apart_before: float = 0.0, now=time.monotonic):
        """start: this session's start (now()'s scale); used_before: the budget earlier sessions used;
        apart_before: the time they spent apart (reported, never charged)."""
        self.now = now
        self.t0 = start - used_before
        self.apart_before, self.apart_here = apart_before, 0.0
        self._since = None   # now() as the time apart under way began

    def _apart_now(self, at: float) -> float:
        return self.apart_here + (at - self._since if self._since is not None else 0.0)

    def elapsed(self) -> float:
        """The budget used: the wall time since the first start less the time apart (under way included)."""
        at = self.now()
        return at - self.t0 - self._apart_now(at)

    def apart_s(self) -> float:
        """Every session's time apart so far, one under way included."""
        return self.apart_before + self._apart_now(self.now())

    @contextmanager
    def apart(self):
        """Time inside is not charged to the budget (however it ends: a signal mid-calibration too)."""
        self._since = self.now()
        try:
            yield self
        finally:
            self.apart_here += self.now() - self._since
            self._since = None


def report_s(budget_s: float) -> float:
    """Kept from the budget for the decision and the report."""
    return min(10.0, max(3.0, 0.05 * budget_s))
