"""`make claims-stability`: do the claims' verdicts hold across runs? The claims' cells (suites/validate.toml) run
N times on this machine, each a separate `rlbench validate` run (its own sweep, fresh processes), each run's
claims matrix judged on that run alone; then, per claim, its verdict in every run, how many runs gave the most
common one, and whether it flipped between `reproduced` and `not reproduced` (an `inconclusive` between them is
allowed: it is what the three-way verdict is for). Exit 1 where a claim flipped.

  python scripts/claims_stability.py --out DIR [--runs 3] [--noise-from AA_RUN...] [--from RUN...]

DIR gets run-1 .. run-N (each a validate run with its claims.csv), stability.csv and stability.md. --noise-from:
this machine's A/A runs, whose run-to-run spread widens every ratio's CI (as `rlbench validate --noise-from`);
--from: judge runs that exist instead of running (their claims.csv rewritten by today's rules).
"""
import argparse
import csv
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from rlbench.families.validation.claims import JudgedClaim  # noqa: E402
from rlbench.families.validation.stability import stability  # noqa: E402
from rlbench.report.writer import write_atomic  # noqa: E402


def validate(args: list) -> None:
    subprocess.run([sys.executable, "-m", "rlbench.cli", "validate", *args], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)


def read_claims(run: str) -> list:
    with open(os.path.join(run, "claims.csv"), newline="") as f:
        return [JudgedClaim(r["claim"], r["source"], r["says"], r["published"], r["rule"], r["verdict"],
                            r["measured"], r["why"]) for r in csv.DictReader(f)]


def commit_of(run: str) -> str:
    import json
    with open(os.path.join(run, "env.json")) as f:
        record = json.load(f)
    return str((record.get("git") or {}).get("commit") or "")[:7]


def markdown(rows, runs, labels, noise_from) -> str:
    flips = [r.claim for r in rows if r.flipped]
    lines = ["# Claims stability", "",
             f"The claims matrix judged on {len(runs)} separate runs of suites/validate.toml on one machine, each run "
             "alone (`make claims-stability`); per claim its verdict in each run, how many runs gave the most common "
             "one, and what they say together (`flipped`: `reproduced` in one run, `not reproduced` in another). "
             + ("Every ratio's CI is widened by the run-to-run noise of the A/A runs "
                + ", ".join(f"`{os.path.relpath(d, ROOT)}`" for d in noise_from) + "." if noise_from
                else "Every ratio's CI is widened by the 1% floor of run-to-run noise (no A/A runs given)."), "",
             "Runs: " + "; ".join(f"`{label}` (commit {commit_of(run) or '?'})" for label, run in zip(labels, runs)),
             "", f"Flipped: {len(flips)} of {len(rows)} claims" + (f" ({', '.join(flips)})" if flips else "") + ".", "",
             "| claim | " + " | ".join(labels) + " | held | together |",
             "|---|" + "---|" * len(labels) + "---|---|"]
    for r in rows:
        lines.append(f"| `{r.claim}` | " + " | ".join(r.verdicts) + f" | {r.held}/{len(r.verdicts)} | {r.verdict} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="where run-1..run-N, stability.csv and stability.md go")
    p.add_argument("--runs", type=int, default=3, help="separate runs (default 3)")
    p.add_argument("--noise-from", nargs="+", default=[], metavar="DIR", help="this machine's A/A runs")
    p.add_argument("--from", dest="from_dirs", nargs="+", default=[], metavar="DIR",
                   help="judge these runs instead of running")
    args = p.parse_args(argv)
    if args.runs < 2 and not args.from_dirs:
        p.error(f"--runs {args.runs}: stability needs at least 2 runs")
    noise = ["--noise-from", *args.noise_from] if args.noise_from else []
    os.makedirs(args.out, exist_ok=True)
    runs = list(args.from_dirs)
    if runs:
        for run in runs:
            validate(["--from", run, *noise])
    else:
        for k in range(1, args.runs + 1):
            run = os.path.join(args.out, f"run-{k}")
            print(f"claims-stability: run {k} of {args.runs} -> {run}", file=sys.stderr, flush=True)
            validate(["--out", run, *noise])
            runs.append(run)
    labels = [os.path.basename(os.path.normpath(r)) for r in runs]
    rows = stability([read_claims(r) for r in runs])
    records = [r.record(labels) for r in rows]
    with open(os.path.join(args.out, "stability.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(records[0]))
        w.writeheader()
        w.writerows(records)
    write_atomic(os.path.join(args.out, "stability.md"), markdown(rows, runs, labels, args.noise_from))
    flips = [r for r in rows if r.flipped]
    for r in rows:
        print(f"{r.claim:<30} {r.held}/{len(r.verdicts)}  {r.verdict}")
    print(f"claims-stability: {len(flips)} of {len(rows)} claims flipped between reproduced and not reproduced; "
          f"{os.path.join(args.out, 'stability.md')}")
    return 1 if flips else 0


if __name__ == "__main__":
    sys.exit(main())
