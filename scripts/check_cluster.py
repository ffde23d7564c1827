"""Is a sweep on a cluster faster, and does it measure the same? On clusters simulated on this machine
(rlbench.running.cluster.simulated), the same sweep of 1-core cells runs here (pinned to one core, as a
cluster cell is), on 1 node and on N nodes; prints each one's wall time (cluster start not counted) and each
cell's median env steps/s beside the local one. A benchmark, not a test:

    python scripts/check_cluster.py [--nodes 2] [--repeats 3] [--duration 0.5] [--sizes 1,4,16] [--out DIR]

With --out, the three runs (here/, 1-node/, N-nodes/) and what it printed (check-cluster.txt) stay in DIR, as
reports/reference/cpu-2core-xeon/check-cluster/ keeps them for docs/clusters.md.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

SUITE = """name = "cluster-check"
[protocol]
repeats = {repeats}
warmup_s = 0.1
warmup_units = 2
duration_s = {duration}
min_units = 5
timeout_s = 60
cores = 1
affinity = [{core}]
[[sweep]]
adapters = ["serial", "gymnasium-sync"]
envs = ["rlbench/Synthetic-v0"]
num_envs = {sizes}
env_kwargs = {{ step_cost_us = [20, 200] }}
"""


def run(suite: str, out: str, cluster: str = "") -> float:
    """Wall seconds of `rlbench run` (joining the cluster included), or exit with its error."""
    cmd = [sys.executable, "-m", "rlbench.cli", "run", suite, "--out", out]
    cmd += ["--cluster", cluster] if cluster else []
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"check_cluster: {' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return wall


def medians(out: str) -> dict:
    values = {}
    with open(os.path.join(out, "results.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            if row.get("status") == "ok":
                values.setdefault(row["cell_id"], []).append(row["steps_per_s"])
    return {cell: float(np.median(v)) for cell, v in values.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--duration", type=float, default=0.5)
    p.add_argument("--sizes", default="1,4,16")
    p.add_argument("--out", help="keep the runs and the printed table here (a new folder; default: a temporary one)")
    args = p.parse_args()
    from rlbench.running.cluster.simulated import SimulatedCluster
    if args.out and os.path.exists(args.out):
        print(f"check-cluster: --out {args.out} exists (valid: a new folder)", file=sys.stderr)
        return 2
    tmp = args.out or tempfile.mkdtemp(prefix="rlbench-check-cluster-")
    os.makedirs(tmp, exist_ok=True)
    printed = []

    def say(line: str = "") -> None:
        print(line)
        printed.append(line)
    core = sorted(os.sched_getaffinity(0))[0]
    suite = os.path.join(tmp, "suite.toml")
    with open(suite, "w") as f:
        f.write(SUITE.format(repeats=args.repeats, duration=args.duration, core=core,
                             sizes=[int(n) for n in args.sizes.split(",")]))
    walls, figures = {}, {}
    walls["here"] = run(suite, os.path.join(tmp, "here"))
    figures["here"] = medians(os.path.join(tmp, "here"))
    for nodes in (1, args.nodes):
        with SimulatedCluster(nodes, 1) as cluster:
            name = f"{nodes} node" + ("s" if nodes > 1 else "")
            walls[name] = run(suite, os.path.join(tmp, name.replace(" ", "-")), cluster.address)
            figures[name] = medians(os.path.join(tmp, name.replace(" ", "-")))
    one, many = "1 node", f"{args.nodes} nodes"
    width = max(map(len, figures["here"]), default=4)
    say(f"{'cell':<{width}} {'here':>10} " + " ".join(f"{k:>14}" for k in (one, many)))
    ratios = {one: [], many: []}
    for cell, here in figures["here"].items():
        cols = []
        for k in (one, many):
            v = figures[k].get(cell)
            if v:
                ratios[k].append(v / here)
            cols.append(f"{v / here:>13.3f}x" if v else f"{'-':>14}")
        say(f"{cell:<{width}} {here:>10.0f} " + " ".join(cols))
    for k in (one, many):
        r = np.array(ratios[k])
        say(f"{k}: cluster/here steps/s, geometric mean {np.exp(np.log(r).mean()):.3f} "
            f"(min {r.min():.3f}, max {r.max():.3f}, {len(r)} cells)")
    say("wall s: " + ", ".join(f"{k} {v:.1f}" for k, v in walls.items()))
    say(f"wall {many} / {one}: {walls[many] / walls[one]:.2f}; {many} / here: {walls[many] / walls['here']:.2f}")
    say(f"runs: {os.path.relpath(tmp)}")
    with open(os.path.join(tmp, "check-cluster.txt"), "w") as f:
        f.write("\n".join(printed) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
