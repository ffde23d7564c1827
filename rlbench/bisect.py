"""`rlbench bisect`: the first commit, or the first released version of a library, at which a cell got slower,
as `asv find` and `git bisect run` find it.

Every point is measured with the normal protocol (`rlbench run SUITE --only CELL`: fresh processes, its repeats)
and added to the history. A commit is checked out into its own git worktree (the user's checkout is never
touched) and run by this environment's Python importing that commit's rlbench and adapters; a version of a
package runs in its own environment (rlbench.running.version_envs). The two ends are measured first, and must
differ significantly (the pairwise test of `rlbench compare`); a point between them is bad where its median lies
below the geometric midpoint of the two ends' medians. Binary search over the N points after the good end
measures at most ceil(log2 N) + 2 of them. The worktrees are removed whatever happens."""
import fnmatch
import math
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from rlbench.errors import UsageError
from rlbench.results.compare import METRIC, significance
from rlbench.results.model import Run
from rlbench.results.stats import summarize
from rlbench.results.store import RESULTS, read_rows


@dataclass(frozen=True)
class Point:
    at: str                # a commit, or a version of the package
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


def run_cell(python: str, suite: str, cell: str, run_dir: str, run_args, cwd: str, env: dict, at: str) -> tuple:
    """Run the cell into run_dir; its ok, unprofiled steps/s values (else a UsageError with the run's reason)."""
    done = subprocess.run([python, "-m", "rlbench.cli", "run", suite, "--only", cell, "--out", run_dir, *run_args],
                          cwd=cwd, env=env, capture_output=True, text=True)
    path = os.path.join(run_dir, RESULTS)
    runs = [Run.from_row(r) for r in read_rows(path)] if os.path.exists(path) else []
    values = tuple(r[METRIC] for r in runs if r.status == "ok" and not r.profiled and r.get(METRIC) is not None)
    if not values:
        reasons = sorted({r.error or r.status for r in runs if r.status != "ok"})
        raise UsageError(f"bisect: {cell!r} gave no ok repeat at {at} (exit {done.returncode}: "
                         f"{'; '.join(reasons)[:300] or (done.stderr or done.stdout).strip()[-300:]}); valid: a "
                         "cell id of the suite that runs at both ends")
    return values


class CommitRuns:
    """Measures a commit of `repo` in its own worktree; `close` removes what is left."""

    def __init__(self, repo: str, suite: str, cell: str, out: str, run_args=()):
        self.repo, self.suite, self.cell, self.out, self.run_args = repo, os.path.abspath(suite), cell, out, run_args
        self.scratch = tempfile.mkdtemp(prefix="rlbench-bisect-")

    def __call__(self, commit: str) -> tuple:
        """(run folder, its values, the history tag)."""
        tree = os.path.join(self.scratch, commit[:12])
        git(self.repo, "worktree", "add", "--detach", tree, commit)
        try:
            run_dir = os.path.abspath(os.path.join(self.out, commit[:12]))
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tree, os.environ.get("PYTHONPATH")]))}
            return run_dir, run_cell(sys.executable, self.suite, self.cell, run_dir, self.run_args, tree, env,
                                     commit[:12]), None
        finally:
            git(self.repo, "worktree", "remove", "--force", tree)

    def close(self):
        shutil.rmtree(self.scratch, ignore_errors=True)
        subprocess.run(["git", "-C", self.repo, "worktree", "prune"], capture_output=True)


class VersionRuns:
    """Measures a released version of `package`: the cell's environment with that version (an overlay of the main
    one, or its adapter environment with the pin swapped); the run tagged `package==version` in the history."""

    def __init__(self, package: str, suite: str, cell: str, out: str, run_args=()):
        from rlbench import registry
        from rlbench.planning.suite import load_suite
        from rlbench.running.adapter_envs import environment_of
        self.package, self.suite, self.cell, self.out, self.run_args = package, os.path.abspath(suite), cell, out, \
            run_args
        planned = load_suite(suite).cells
        cells = [c for c in planned if fnmatch.fnmatchcase(c.cell_id, cell)]
        if not cells:
            raise UsageError(f"bisect: cell {cell!r} matches no cell of {suite} (valid: a cell id, e.g. "
                             f"{planned[0].cell_id})")
        envs = {}   # environment name ('main' for the main one) -> its AdapterEnv or None
        for c in cells:
            own = environment_of(registry.get(c.adapter))
            envs.setdefault(own.name if own else "main", own)
        if len(envs) > 1:
            raise UsageError(f"bisect: {cell!r} matches cells of several environments ({', '.join(sorted(envs))}); "
                             "valid: a cell id whose cells share one")
        self.adapter_env = next(iter(envs.values()))

    def __call__(self, version: str) -> tuple:
        from rlbench.running.adapter_envs import PINS_VAR, EnvBuildError, venvs_dir
        from rlbench.running.version_envs import OverlayEnv, pins_with
        env, python = dict(os.environ), sys.executable
        if self.adapter_env is None:
            overlay = OverlayEnv(self.package, version)
            try:
                overlay.ensure()
            except EnvBuildError as exc:
                raise UsageError(f"bisect: {self.package}=={version} cannot be installed over the main "
                                 f"environment ({exc}); valid: versions that install beside its pins") from None
            python = overlay.python
        else:
            pins = pins_with(self.adapter_env.requirements, self.package, version, os.path.join(venvs_dir(), "pins"))
            env[PINS_VAR] = ";".join(filter(None, [env.get(PINS_VAR), f"{self.adapter_env.name}={pins}"]))
        run_dir = os.path.abspath(os.path.join(self.out, f"{self.package}-{version}"))
        return run_dir, run_cell(python, self.suite, self.cell, run_dir, self.run_args, os.getcwd(), env,
                                 f"{self.package} {version}"), f"{self.package}=={version}"

    def close(self):
        pass


class Bisect:
    """Binary search over points ordered from good to bad, each measured by `measure(at)` (CommitRuns,
    VersionRuns) and, where `add` is given, added to the history."""

    def __init__(self, cell: str, measure, add=None, log=print):
        self.cell, self.measure, self.add, self.log = cell, measure, add, log
        self.measured = {}

    def point(self, at: str) -> Point:
        if at in self.measured:
            return self.measured[at]
        run_dir, values, tag = self.measure(at)
        if self.add is not None:
            self.add(run_dir, tag=tag)
        point = Point(at, run_dir, summarize(values).median, values)
        self.measured[at] = point
        self.log(f"bisect: {at[:12]} {point.median:,.0f} steps/s ({len(values)} repeats)")
        return point

    def run(self, points: list, alpha: float = 0.05) -> tuple:
        """(first bad point, the points measured, the midpoint)."""
        try:
            good, bad = self.point(points[0]), self.point(points[-1])
            gs, bs = summarize(good.values), summarize(bad.values)
            significant, p, test = significance(list(good.values), list(bad.values), gs, bs, alpha)
            if not significant or bad.median >= good.median:
                raise UsageError(f"bisect: {self.cell} is not significantly slower at the bad end ({bad.median:,.0f} "
                                 f"steps/s) than at the good end ({good.median:,.0f}; {test}); nothing to bisect "
                                 "(valid: ends whose runs differ; more --repeats)")
            midpoint = math.sqrt(good.median * bad.median)
            lo, hi = 0, len(points) - 1
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if self.point(points[mid]).median < midpoint:
                    hi = mid
                else:
                    lo = mid
            return points[hi], list(self.measured.values()), midpoint
        finally:
            self.measure.close()
