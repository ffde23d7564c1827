"""`make reference MACHINE=NAME`: the reference runs of every suite that fits this machine, made at one commit, into
reports/reference/NAME/ with the table of what made each (reports/reference/NAME/README.md).

The set takes hours (the replay, rlpyt and ray suites ~35 min each on 2 cores), so a set must survive being cut off
and stay one commit's: it refuses a working tree with changes to tracked files (env.json would record them as
dirty); each suite runs in reports/reference-staging/<commit>/SUITE, out of git's sight, so that one run's files do
not make the next one's tree dirty; a later invocation at the same commit resumes each suite already begun (`rlbench
resume`: seconds for one that finished, the missing repeats of the one that was cut). Only when every suite of the
set has finished are the runs moved into reports/reference/NAME/ (replacing the folders of the same name, their
READMEs kept: the script lists them, their figures are the old run's until someone rewrites them) and the table
written.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

from filelock import FileLock, Timeout
from reference_index import write_index

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# suite -> extra `rlbench run` arguments, shortest first: every suite that fits a 2-core machine in hours (the GPU
# suites do not). On 2 cores the set but `train` takes ~3.5 hours (`cpu` about one of them), `train` (CartPole and
# Pong to a return) one more, so it runs only when named (SUITES=train, or with the others).
SUITES = {
    "replay-quick": [], "train-cpu": [], "jax-cpu": [], "rlpyt-targets": [], "quick": [], "mujoco": [], "atari": [],
    "brax": [], "physics": [], "physics-train": [], "replay-reuse": [], "validate": [], "learners": [], "ray": [],
    "replay": ["--repeats", "1"], "rlpyt": [], "cpu": [], "train": [],
}
DEFAULT = [s for s in SUITES if s != "train"]


def git(*args) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def parse_args(argv):
    p = argparse.ArgumentParser(prog="reference_runs.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--machine", required=True, help="the folder under reports/reference/, e.g. cpu-2core-xeon")
    p.add_argument("--suites", default="", help="space- or comma-separated suites (default: all but train)")
    p.add_argument("--staging", default=os.path.join(ROOT, "reports", "reference-staging"),
                   help=argparse.SUPPRESS)   # tests put it in a temporary folder
    return p.parse_args(argv)


def check(args) -> list:
    """The suites to run, or a one-line UsageError-style refusal (exit 2, nothing written)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", args.machine):
        raise SystemExit(f"reference: --machine {args.machine!r} is not a plain folder name (letters, digits, "
                         "'.', '_', '-')")
    suites = [s for s in re.split(r"[\s,]+", args.suites) if s] or DEFAULT
    for s in suites:
        if s not in SUITES:
            raise SystemExit(f"reference: unknown suite '{s}' (valid: {', '.join(SUITES)})")
    try:
        paths = [line[3:] for line in git("status", "--porcelain", "--untracked-files=no").splitlines()]
    except (OSError, subprocess.CalledProcessError):
        raise SystemExit(f"reference: {ROOT} is not a git checkout: a reference set records the commit it "
                         "ran") from None
    if paths:
        raise SystemExit(f"reference: the working tree has changes to tracked files ({', '.join(paths[:5])}"
                         f"{', ...' if len(paths) > 5 else ''}): commit or stash them, a reference set is one "
                         "commit's")
    return suites


def run_suite(suite: str, folder: str) -> int:
    """One suite into its staging folder: a fresh run, or the rest of a cut one."""
    rlbench = [sys.executable, "-m", "rlbench.cli"]
    if os.path.isfile(os.path.join(folder, "plan.json")):
        cmd = rlbench + ["resume", folder, "--allow-errors"]
    else:
        shutil.rmtree(folder, ignore_errors=True)   # a run cut before its plan was written holds nothing
        cmd = rlbench + ["run", f"suites/{suite}.toml", "--out", folder, "--allow-errors", *SUITES[suite]]
    print(f"reference: {suite}: {' '.join(cmd[3:])}", flush=True)
    return subprocess.run(cmd, cwd=ROOT).returncode


def install(staged: dict, dest_root: str) -> list:
    """Every staged run into reports/reference/MACHINE/SUITE; the folders whose README.md now describes an older
    run."""
    stale = []
    os.makedirs(dest_root, exist_ok=True)
    for suite, folder in staged.items():
        dest = os.path.join(dest_root, suite)
        readme = os.path.join(dest, "README.md")
        if os.path.isfile(readme):   # the new run's folder takes the old README along
            shutil.move(readme, os.path.join(folder, "README.md"))
            stale.append(os.path.relpath(readme, ROOT))
        shutil.rmtree(dest, ignore_errors=True)
        shutil.move(folder, dest)
    return stale


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        suites = check(args)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    commit = git("rev-parse", "HEAD").strip()
    staging = os.path.join(args.staging, commit[:10])
    os.makedirs(args.staging, exist_ok=True)
    lock = FileLock(staging + ".lock")   # one set per commit at a time: another's staging folder is not ours
    try:
        lock.acquire(timeout=0)
    except Timeout:
        print(f"reference: another `make reference` at {commit[:10]} holds {staging}.lock", file=sys.stderr)
        return 2
    try:
        return run_set(args, suites, commit, staging)
    except KeyboardInterrupt:   # the suite's own run has kept its finished rows
        print(f"reference: interrupted; `make reference` again at {commit[:10]} resumes", file=sys.stderr)
        return 130
    finally:
        lock.release()


def run_set(args, suites: list, commit: str, staging: str) -> int:
    staged = {}
    for suite in suites:
        folder = os.path.join(staging, suite)
        t0 = time.monotonic()
        rc = run_suite(suite, folder)
        if rc != 0:
            print(f"reference: {suite} stopped (exit {rc}); `make reference` again at this commit resumes it",
                  file=sys.stderr)
            return rc
        print(f"reference: {suite} done in {time.monotonic() - t0:.0f} s", flush=True)
        staged[suite] = folder
    now = git("rev-parse", "HEAD").strip()
    if now != commit:   # the code moved under the set: its runs are not one commit's
        print(f"reference: HEAD moved from {commit[:10]} to {now[:10]} during the set; its runs stay in {staging}",
              file=sys.stderr)
        return 2
    dest_root = os.path.join(ROOT, "reports", "reference", args.machine)
    stale = install(staged, dest_root)   # each run's page came with it (run and resume write index.html)
    index = write_index(dest_root, f"Reference runs: {args.machine}",
                        f"Made by `make reference MACHINE={args.machine}` (scripts/reference_runs.py).")
    shutil.rmtree(staging, ignore_errors=True)
    print(f"reference: {len(staged)} suites at {commit[:10]} in {os.path.relpath(dest_root, ROOT)}; table "
          f"{os.path.relpath(index, ROOT)}")
    if stale:
        print("reference: these READMEs describe the previous runs, rewrite them from the new figures:\n  "
              + "\n  ".join(stale))
    return 0


if __name__ == "__main__":
    sys.exit(main())
