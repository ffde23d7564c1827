"""`rlbench bisect`: the first commit at which a cell got slower, as `asv find` and `git bisect run` find it.

Each commit measured is checked out into its own git worktree (the user's checkout is never touched) and the
cell is run there with the normal protocol (`rlbench run SUITE --only CELL`: fresh processes, its repeats) by this
environment's Python, importing that commit's rlbench and adapters; every run is added to the history. The two
ends are measured first, and must differ significantly (the pairwise test of `rlbench compare`); a commit between
them is bad where its median lies below the geometric midpoint of the two ends' medians. Binary search over the
N commits of the ancestry path measures at most ceil(log2 N) + 2 points. The worktrees are removed whatever
happens."""
import math
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from rlbench.errors import UsageError
from rlbench.results.compare import METRIC, significance
from rlbench.results.stats import summarize
from rlbench.results.store import RESULTS, read_rows


@dataclass(frozen=True)
class Point:
    commit: str
    run_dir: str
    median: float
    values: tuple


def git(repo: str, *args) -> str:
    out = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)
    if out.returncode:
        raise UsageError(f"bisect: git {' '.join(args)}: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout.strip()


def path_between(repo: str, good: str, bad: str) -> list:
    """[good, ..., bad]: the commits of the ancestry path from good to bad, oldest first."""
    good_sha, bad_sha = git(repo, "rev-parse", "--verify", f"{good}^{{commit}}"), \
        git(repo, "rev-parse", "--verify", f"{bad}^{{commit}}")
    if subprocess.run(["git", "-C", repo, "merge-base", "--is-ancestor", good_sha, bad_sha]).returncode:
        raise UsageError(f"bisect: --good {good} is not an ancestor of --bad {bad} (valid: an older commit of the "
                         "same history)")
    between = git(repo, "rev-list", "--ancestry-path", "--reverse", f"{good_sha}..{bad_sha}").split()
    return [good_sha, *between]


class Bisect:
    def __init__(self, repo: str, suite: str, cell: str, out: str, run_args=(), add=None, log=print):
        self.repo, self.suite, self.cell, self.out = repo, os.path.abspath(suite), cell, out
        self.run_args, self.add, self.log = list(run_args), add, log
        self.scratch = tempfile.mkdtemp(prefix="rlbench-bisect-")
        self.measured = {}

    def measure(self, commit: str) -> Point:
        if commit in self.measured:
            return self.measured[commit]
        tree = os.path.join(self.scratch, commit[:12])
        git(self.repo, "worktree", "add", "--detach", tree, commit)
        try:
            run_dir = os.path.abspath(os.path.join(self.out, commit[:12]))
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tree, os.environ.get("PYTHONPATH")]))}
            done = subprocess.run([sys.executable, "-m", "rlbench.cli", "run", self.suite, "--only", self.cell,
                                   "--out", run_dir, *self.run_args], cwd=tree, env=env, capture_output=True,
                                  text=True)
        finally:
            git(self.repo, "worktree", "remove", "--force", tree)
        rows = read_rows(os.path.join(run_dir, RESULTS)) if os.path.exists(os.path.join(run_dir, RESULTS)) else []
        values = tuple(r[METRIC] for r in rows if r["status"] == "ok" and not r.get("profiled")
                       and r.get(METRIC) is not None)
        if not values:
            raise UsageError(f"bisect: {self.cell!r} gave no ok repeat at {commit[:12]} (exit {done.returncode}: "
                             f"{(done.stderr or done.stdout).strip()[-300:]}); valid: a cell id of the suite that "
                             "runs at both ends")
        if self.add is not None:
            self.add(run_dir)
        point = Point(commit, run_dir, summarize(values).median, values)
        self.measured[commit] = point
        self.log(f"bisect: {commit[:12]} {point.median:,.0f} steps/s ({len(values)} repeats)")
        return point

    def run(self, commits: list, alpha: float = 0.05) -> tuple:
        """(first bad commit, the points measured, the midpoint): binary search between the two ends."""
        try:
            good, bad = self.measure(commits[0]), self.measure(commits[-1])
            gs, bs = summarize(good.values), summarize(bad.values)
            significant, p, test = significance(list(good.values), list(bad.values), gs, bs, alpha)
            if not significant or bad.median >= good.median:
                raise UsageError(f"bisect: {self.cell} is not significantly slower at --bad ({bad.median:,.0f} "
                                 f"steps/s) than at --good ({good.median:,.0f}; {test}); nothing to bisect "
                                 "(valid: ends whose runs differ; more --repeats)")
            midpoint = math.sqrt(good.median * bad.median)
            lo, hi = 0, len(commits) - 1
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if self.measure(commits[mid]).median < midpoint:
                    hi = mid
                else:
                    lo = mid
            return commits[hi], list(self.measured.values()), midpoint
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)
            subprocess.run(["git", "-C", self.repo, "worktree", "prune"], capture_output=True)
