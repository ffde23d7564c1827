"""Where GPU physics overtakes CPU physics on one model, from the device kit's physics parts as they came back
(gpu-physics: MJX on the GPU and mujoco.rollout on the machine's cores; gpu-warp: MuJoCo Warp on the GPU; cores16:
EnvPool's threads): per env and policy, the fastest backend of each side at each num_envs both measured (medians
and 95% CIs from each run's summary.csv), and the smallest num_envs from which the GPU side stays ahead. Written
to KIND/gpu-physics/README.md, which `device_kit.py unpack` remakes whenever one of those parts lands.

    python scripts/physics_crossover.py reports/reference/nvidia-h200      # prints the table, writes the README
"""
import argparse
import json
import os
import sys

import pandas as pd

PARTS = ("gpu-physics", "gpu-warp", "cores16")
OUT = os.path.join("gpu-physics", "README.md")


def on_gpu(row) -> bool:
    opts = row["options"]
    return (str(row["device"]).startswith(("cuda", "gpu")) or opts.get("platform") == "gpu"
            or opts.get("device") == "cuda")


def backend(row) -> str:
    """The adapter and the options that make it what it is (its device is the side it stands on)."""
    opts = ", ".join(f"{k}={v}" for k, v in sorted(row["options"].items()) if k not in ("platform", "device"))
    return f"{row['adapter']} ({opts})" if opts else row["adapter"]


def rows(kind_dir: str) -> pd.DataFrame:
    """The ok cells of the physics parts under kind_dir on the envs both sides stepped, one line each."""
    frames = []
    for part in PARTS:
        path = os.path.join(kind_dir, part, "summary.csv")
        if os.path.exists(path):
            frames.append(pd.read_csv(path).assign(part=part))
    if not frames:
        return pd.DataFrame()
    df = pd.concat(frames, ignore_index=True)
    df = df[df["status"] == "ok"].copy()
    if "gpu_mem_peak_mb_max" not in df:     # runs made before rows recorded GPU memory
        df["gpu_mem_peak_mb_max"] = float("nan")
    df["options"] = df["options"].fillna("{}").map(lambda s: json.loads(s) if s else {})
    df["side"] = df.apply(lambda r: "gpu" if on_gpu(r) else "cpu", axis=1)
    df["backend"] = df.apply(backend, axis=1)
    df["policy_kind"] = df["policy"].str.split("-").str[0]    # mlp64x64-cuda-t1 and mlp64x64-cpu-t1: one MLP
    both = df.groupby("env")["side"].nunique()
    return df[df["env"].isin(both[both == 2].index)]


def fastest(df: pd.DataFrame) -> pd.DataFrame:
    """Per env, policy, num_envs and side: the backend with the highest median."""
    best = df.loc[df.groupby(["env", "policy_kind", "num_envs", "side"])["steps_per_s_median"].idxmax()]
    cols = ["backend", "part", "steps_per_s_median", "steps_per_s_ci_low", "steps_per_s_ci_high",
            "gpu_mem_peak_mb_max"]
    wide = best.pivot_table(index=["env", "policy_kind", "num_envs"], columns="side", values=cols, aggfunc="first",
                            dropna=False)
    wide.columns = [f"{side}_{col}" for col, side in wide.columns]
    return wide.dropna(subset=["cpu_steps_per_s_median", "gpu_steps_per_s_median"]).reset_index()


def crossover(group: pd.DataFrame) -> str:
    """The smallest num_envs from which the GPU side's median is ahead at every larger size measured."""
    group = group.sort_values("num_envs")
    ahead = list(group["gpu_steps_per_s_median"] > group["cpu_steps_per_s_median"])
    sizes = list(group["num_envs"])
    if not any(ahead):
        return f"The CPU side is ahead at every num_envs measured (up to {sizes[-1]})"
    first = next(i for i in range(len(ahead)) if all(ahead[i:]))
    if first == 0:
        return f"The GPU side is ahead at every num_envs measured (from {sizes[0]})"
    return f"The GPU side is ahead from {sizes[first]} envs on (the CPU side at {sizes[first - 1]})"


def mb(r) -> str:
    """The GPU side's peak GPU memory (gpu_mem_peak_mb), where its rows recorded it."""
    value = getattr(r, "gpu_gpu_mem_peak_mb_max", None)
    return "-" if value is None or pd.isna(value) else f"{value:,.0f}"


def k(x: float) -> str:
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{x / 1e3:.1f}k" if x >= 1e3 else f"{x:.0f}"


def markdown(kind_dir: str) -> str:
    df = rows(kind_dir)
    parts = [p for p in PARTS if os.path.exists(os.path.join(kind_dir, p, "summary.csv"))]
    head = ("# GPU against CPU physics: the crossover in num_envs\n\n"
            f"Made by `python scripts/physics_crossover.py` from {', '.join(parts) or 'no physics part'} (their "
            "summary.csv: medians of env steps per second, 95% CI in brackets; the kind's README.md says which "
            "commit made each). Per env and policy, the fastest backend of each side at each num_envs both sides "
            "measured, and the GPU side's peak GPU memory (gpu_mem_peak_mb); the GPU side's MLP runs on the GPU, "
            "the CPU side's on its cores. MJX and MuJoCo Warp step "
            "Newton where Humanoid-v4's model says PGS; EnvPool and mujoco-rollout step PGS unless the backend "
            "says solver=newton.\n")
    if df.empty:
        return head + "\nNo env was stepped on both sides yet.\n"
    table = fastest(df)
    out = [head]
    for (env, policy), group in table.groupby(["env", "policy_kind"]):
        out += [f"\n## {env}, {policy}\n", f"{crossover(group)}.\n",
                "| num_envs | CPU: fastest | env steps/s | GPU: fastest | env steps/s | GPU / CPU | its GPU MB |",
                "|---|---|---|---|---|---|---|"]
        for r in group.sort_values("num_envs").itertuples():
            out.append(f"| {r.num_envs} | {r.cpu_backend} ({r.cpu_part}) | {k(r.cpu_steps_per_s_median)} "
                       f"[{k(r.cpu_steps_per_s_ci_low)}, {k(r.cpu_steps_per_s_ci_high)}] | {r.gpu_backend} "
                       f"({r.gpu_part}) | {k(r.gpu_steps_per_s_median)} [{k(r.gpu_steps_per_s_ci_low)}, "
                       f"{k(r.gpu_steps_per_s_ci_high)}] | "
                       f"{r.gpu_steps_per_s_median / r.cpu_steps_per_s_median:.2f}x | {mb(r)} |")
    return "\n".join(out) + "\n"


def write(kind_dir: str) -> str | None:
    """KIND/gpu-physics/README.md when gpu-physics is there; its path, else None."""
    if not os.path.isdir(os.path.join(kind_dir, "gpu-physics")):
        return None
    path = os.path.join(kind_dir, OUT)
    with open(path, "w") as f:
        f.write(markdown(kind_dir))
    return path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kind_dir", help="reports/reference/KIND: the folder the device kit's parts were unpacked into")
    args = p.parse_args()
    if not os.path.isdir(args.kind_dir):
        print(f"physics_crossover: no folder {args.kind_dir}", file=sys.stderr)
        return 2
    print(markdown(args.kind_dir))
    path = write(args.kind_dir)
    print(f"physics_crossover: {path or 'no gpu-physics folder there: nothing written'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
