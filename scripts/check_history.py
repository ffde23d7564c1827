"""Does `rlbench history check` tell a regression from this machine's noise, and how does it fare against the
pairwise `rlbench compare` gate? On a small suite (suites/history.toml):

1. A/A: `--aa` runs of the suite at this commit, one after another, each added to a fresh history.
2. False alarms: each A/A run from the `--min-history`th on, checked against the runs before it (as CI would
   check each new run), and compared pairwise with the run before it.
3. Recall: `--slowed` runs per level in which one cell (serial on the synthetic env) has its step cost raised by
   the level (5%, 10%): a real slowdown of that env, measured. Their rows are labelled as the unslowed cell, as a
   code change that slowed that env would leave them, then each run is checked against the whole A/A history
   and compared with the last A/A run.

It prints recall (the slowed cell flagged slower) and false alarms (A/A cells flagged, and suites) per gate: the
history check's first verdict, the same after `--confirm` ran the cells it found slower a second time, and the
pairwise compare; it writes check-history.csv, check-history.md and every run under --out.

    python scripts/check_history.py [--aa 20] [--slowed 8] [--levels 5,10] [--out reports/check-history]
"""
import argparse
import json
import os
import subprocess
import sys
import tomllib

SUITE = "suites/history.toml"
SLOWED_ADAPTER, SLOWED_ENV = "serial", "rlbench/Synthetic-v0"


def rlbench(*args, check=True):
    out = subprocess.run([sys.executable, "-m", "rlbench.cli", *args], capture_output=True, text=True)
    if check and out.returncode not in (0, 1):
        raise SystemExit(f"check-history: rlbench {' '.join(args)} failed ({out.returncode}): {out.stderr[-2000:]}")
    return out


def slowed_suite(out_dir: str, factor: float) -> tuple:
    """The suite file with the slowed cell's step cost times `factor`."""
    import tomli_w
    with open(SUITE, "rb") as f:
        suite = tomllib.load(f)
    sweep = next(s for s in suite["sweep"] if s["adapters"] == [SLOWED_ADAPTER] and s["envs"] == [SLOWED_ENV])
    sweep["env_kwargs"]["step_cost_us"] = round(sweep["env_kwargs"]["step_cost_us"] * factor, 6)
    path = os.path.join(out_dir, f"history-slowed-{factor:g}.toml")
    with open(path, "wb") as f:
        tomli_w.dump(suite, f)
    return path


def _rows(run_dir: str) -> list:
    return [json.loads(line) for line in open(os.path.join(run_dir, "results.jsonl")) if line.strip()]


def relabel(run_dir: str, like: str) -> str:
    """The slowed cell's rows under the id and kwargs the unslowed cell has in run `like`; that id."""
    original = next(r for r in _rows(like) if r["adapter"] == SLOWED_ADAPTER and r["env"] == SLOWED_ENV)
    rows = _rows(run_dir)
    for r in rows:
        if r["adapter"] == SLOWED_ADAPTER and r["env"] == SLOWED_ENV:
            r.update(cell_id=original["cell_id"], env_kwargs=original["env_kwargs"])
    with open(os.path.join(run_dir, "results.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    return original["cell_id"]


def verdicts(csv_path: str, column: str = "verdict") -> dict:
    import pandas as pd
    frame = pd.read_csv(csv_path)
    return dict(zip(frame["cell_id"], frame[column]))


def gates(run: str, base: str, db: str, out: str) -> dict:
    """{gate: {cell: verdict}} of one run: the history check (its first verdict, and after the slower cells' second
    run) and the pairwise compare with `base`."""
    rlbench("history", "check", run, "--db", db, "--out", out, "--confirm")
    got = {"history": verdicts(os.path.join(out, "history-check.csv"), "first_verdict"),
           "history --confirm": verdicts(os.path.join(out, "history-check.csv"))}
    rlbench("compare", base, run, "--out", out)
    got["compare"] = verdicts(os.path.join(out, "compare.csv"))
    return got


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--aa", type=int, default=20, help="A/A runs (default 20)")
    p.add_argument("--min-history", type=int, default=8, help="runs of history before the first A/A check")
    p.add_argument("--slowed", type=int, default=8, help="runs per slowdown level (default 8)")
    p.add_argument("--levels", default="5,10", help="slowdowns in percent (default 5,10)")
    p.add_argument("--out", default="reports/check-history")
    args = p.parse_args()
    levels = [float(x) for x in args.levels.split(",")]
    if args.aa <= args.min_history:
        print(f"check-history: --aa {args.aa} must exceed --min-history {args.min_history}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    db = os.path.join(args.out, "history.sqlite")
    if os.path.exists(db):
        os.remove(db)
    records, aa = [], []
    for i in range(args.aa):
        run = os.path.join(args.out, f"aa-{i:02d}")
        rlbench("run", SUITE, "--out", run)
        if i >= args.min_history:
            for gate, seen in gates(run, aa[-1], db, os.path.join(args.out, f"check-aa-{i:02d}")).items():
                records += [{"gate": gate, "level_pct": 0.0, "run": i, "cell_id": c, "verdict": v, "slowed": False}
                            for c, v in seen.items()]
        rlbench("history", "add", run, "--db", db, "--tag", "aa")   # one group of A/A runs, even from a dirty tree
        aa.append(run)
        print(f"check-history: A/A run {i + 1}/{args.aa}", flush=True)
    for level in levels:
        suite = slowed_suite(args.out, 1 + level / 100)
        for k in range(args.slowed):
            run = os.path.join(args.out, f"slowed-{level:g}-{k:02d}")
            rlbench("run", suite, "--out", run)
            target = relabel(run, aa[0])
            for gate, seen in gates(run, aa[-1], db, os.path.join(args.out, f"check-slowed-{level:g}-{k:02d}")).items():
                records += [{"gate": gate, "level_pct": level, "run": k, "cell_id": c, "verdict": v,
                             "slowed": c == target} for c, v in seen.items()]
            print(f"check-history: {level:g}% slowed run {k + 1}/{args.slowed}", flush=True)
    import pandas as pd
    frame = pd.DataFrame(records)
    frame.to_csv(os.path.join(args.out, "check-history.csv"), index=False)
    lines = ["| gate | A/A cells flagged | A/A runs flagged | " + " | ".join(f"recall at {lv:g}%" for lv in levels)
             + " |", "|---|---|---|" + "---|" * len(levels)]
    for gate, mine in frame.groupby("gate"):
        aa_rows = mine[mine["level_pct"] == 0]
        flagged = aa_rows["verdict"] == "slower"
        runs = aa_rows.assign(f=flagged).groupby("run")["f"].any()
        other = mine[(mine["level_pct"] > 0) & ~mine["slowed"]]
        cells = f"{flagged.sum()}/{len(aa_rows)} ({flagged.mean():.1%})"
        recalls = []
        for lv in levels:
            hit = mine[(mine["level_pct"] == lv) & mine["slowed"]]["verdict"] == "slower"
            recalls.append(f"{hit.sum()}/{len(hit)} ({hit.mean():.0%})")
        lines.append(f"| {gate} | {cells} | {runs.sum()}/{len(runs)} | " + " | ".join(recalls) + " |")
        lines.append(f"| {gate}: other cells of slowed runs flagged | "
                     f"{(other['verdict'] == 'slower').sum()}/{len(other)} | | " + " | " * (len(levels) - 1) + " |")
    print("\n".join(lines))
    with open(os.path.join(args.out, "check-history.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
