"""Is `rlbench tune` right? For each env of a panel spanning the regimes that decide the answer, runs
`rlbench tune`, then an exhaustive sweep of the same candidates (every adapter given x every size x every
setting its tune_space names there, tune's pick included: one run, repeats interleaved, tune's own
protocol), and prints tune's pick re-measured inside the sweep as a share of the sweep's best, and tune's
wall time against the sweep's. Goal: >= 0.9 of the best on every env in <= 25% of the sweep's time.

    python scripts/check_tune.py [--budget 60s] [--envs trivial,gil,stragglers,large-obs,policy]
                                 [--adapters serial,rlpyt-serial,...] [--sizes 1,2,4,8,16,32,64] [--repeats 3]
                                 [--tune-adapters all]

A benchmark, not a test: its figures depend on the machine. The table goes to stdout and, with each
env's tune and sweep folders, to --out (check-tune.csv)."""
import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import replace

ENV = "rlbench/Synthetic-v0"
# name -> (env arguments, policy): a trivial step; a heavy step that holds the GIL; steps of highly
# variable length (stragglers); large observations; a cheap step with an expensive policy
PANEL = {
    "trivial": ({"step_cost_us": 0, "obs_bytes": 16}, "random"),
    "gil": ({"step_cost_us": 500}, "random"),
    "stragglers": ({"step_cost_us": 50, "straggler_p": 0.05, "straggler_x": 20}, "random"),
    "large-obs": ({"step_cost_us": 20, "obs_bytes": 32768}, "random"),
    "policy": ({"step_cost_us": 1}, "fixed_cost:cost_us=200"),
}
ADAPTERS = "serial,rlpyt-serial,rlpyt-cpu,gymnasium-sync,gymnasium-async,sb3-subproc"


def tune(name, kwargs, policy, args, out) -> tuple:
    cmd = [sys.executable, "-m", "rlbench.cli", "tune", "--env", ENV, "--policy", policy, "--budget", args.budget,
           "--max-envs", str(max(args.sizes)), "--out", out]
    if args.tune_adapters != "all":
        cmd += ["--adapters", args.tune_adapters or args.adapters]
    for k, v in kwargs.items():
        cmd += ["--env-kwarg", f"{k}={v}"]
    t = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t
    if proc.returncode != 0:
        raise SystemExit(f"check-tune: tune of {name} failed ({proc.returncode}): {proc.stderr[-1500:]}")
    with open(os.path.join(out, "tune.json")) as f:
        return json.load(f), wall


def sweep(kwargs, policy, record, args, out) -> tuple:
    """Every candidate of tune's space at these sizes, and tune's pick, in one interleaved run."""
    from rlbench.planning.suite import make_cell
    from rlbench.running.sweep import run_sweep
    from rlbench.tuning import SETTINGS, prepare
    from rlbench.tuning.candidates import Space, cpus_here
    from rlbench.workload import Workload, parse_policy
    workload = Workload(ENV, 1, parse_policy(policy), 0, 1, dict(kwargs))
    space = Space(workload, args.adapters.split(","), max(args.sizes), cpus_here())
    cells = {}
    for adapter in space.adapters:
        for n in args.sizes:
            for _, cell in space.settings(adapter, n):
                cells[cell.cell_id] = cell
    win = record["decision"]["winner"]
    if win["cell_id"] not in cells:
        pick = make_cell("check-tune", win["adapter"], replace(workload, num_envs=win["num_envs"]), win["options"])
        cells[pick.cell_id] = pick
    cells = [replace(c, index=i) for i, c in enumerate(cells.values())]
    os.makedirs(out, exist_ok=True)
    t = time.monotonic()
    results = run_sweep("check-tune", "check-tune", cells, replace(SETTINGS, repeats=args.repeats), out,
                        envs=prepare(space.adapters, {}))
    return results, time.monotonic() - t, len(cells)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", default="60s", help="each tune's budget (default 60s)")
    p.add_argument("--envs", default=",".join(PANEL), help=f"panel entries (valid: {', '.join(PANEL)})")
    p.add_argument("--adapters", default=ADAPTERS, help="strategies swept (and raced, unless --tune-adapters)")
    p.add_argument("--tune-adapters", help="strategies tune races, if not those swept ('all': every one available "
                                           "here, as a user's tune; its pick is added to the sweep)")
    p.add_argument("--sizes", default="1,2,4,8,16,32,64", help="num_envs of the exhaustive sweep (tune's --max-envs: "
                                                           "the largest)")
    p.add_argument("--repeats", type=int, default=3, help="repeats per configuration in the sweep")
    p.add_argument("--out", default="reports/check-tune")
    args = p.parse_args()
    args.sizes = sorted({int(n) for n in args.sizes.split(",")})
    names = args.envs.split(",")
    bad = [n for n in names if n not in PANEL]
    if bad:
        print(f"check-tune: unknown env '{bad[0]}' (valid: {', '.join(PANEL)})", file=sys.stderr)
        return 2
    import pandas as pd

    from rlbench.report.ranking import entry, verdict
    # the calibration is per machine and cached: measured once here, so every tune's budget goes to its search
    raced = [] if args.tune_adapters == "all" else ["--adapters", args.tune_adapters or args.adapters]
    subprocess.run([sys.executable, "-m", "rlbench.cli", "calibrate", *raced], check=True, capture_output=True)
    rows = []
    for name in names:
        kwargs, policy = PANEL[name]
        base = os.path.join(args.out, name)
        record, tune_s = tune(name, kwargs, policy, args, os.path.join(base, "tune"))
        results, sweep_s, n_cells = sweep(kwargs, policy, record, args, os.path.join(base, "sweep"))
        summary = {r["cell_id"]: r for r in results.summary_rows() if r["n"]}
        best = verdict([entry(r, results) for r in summary.values()]).winner
        win = record["decision"]["winner"]
        pick = summary.get(win["cell_id"])
        rate = pick["steps_per_s_median"] if pick else float("nan")
        rows.append({"env": name, "tune_pick": win["config"], "tune_pick_in_tune": win["steps_per_s"],
                     "tune_pick_in_sweep": rate, "sweep_best": best.text, "sweep_best_steps_per_s": best.median,
                     "ratio_to_best": rate / best.median, "tune_s": tune_s, "sweep_s": sweep_s,
                     "time_share": tune_s / sweep_s, "sweep_configurations": n_cells,
                     "tune_stop": record["stop_reason"]})
        print(f"check-tune: {name}: tune's pick {win['config']} at {rate:,.0f} in the sweep, best {best.text} at "
              f"{best.median:,.0f}: {rate / best.median:.2f}x in {tune_s:.0f} s vs {sweep_s:.0f} s", file=sys.stderr)
    table = pd.DataFrame(rows)
    os.makedirs(args.out, exist_ok=True)
    table.to_csv(os.path.join(args.out, "check-tune.csv"), index=False)
    shown = table[["env", "tune_pick", "sweep_best", "ratio_to_best", "tune_s", "sweep_s", "time_share"]]
    print(shown.to_markdown(index=False, floatfmt=".2f") if _has_tabulate() else shown.to_string(index=False))
    ok = (table["ratio_to_best"] >= 0.9).all() and (table["time_share"] <= 0.25).all()
    print(f"goal (>= 0.9 of the best on every env, in <= 25% of the sweep's time): {'met' if ok else 'not met'}")
    return 0


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
        return True
    except ImportError:
        return False


if __name__ == "__main__":
    sys.exit(main())
