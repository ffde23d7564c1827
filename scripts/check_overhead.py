"""Does the harness distort what it measures? Runs the same library calls as a bare hand-written
loop and as an rlbench cell, alternating, each in a fresh process, and prints the ratio of medians.

    python scripts/check_overhead.py [--repeats 5] [--duration 2] [--num-envs 16] [--env Pong-v5]

The bare loops build envs with rlbench.envs (the same construction every adapter uses, e.g. Atari
preprocessing) but time themselves: no harness code runs inside them. `gymnax` compares the adapter with
a hand-written jitted scan of the same env (its default scan_T and random policy), CartPole-v1 only, at
--jax-num-envs (4096):

    python scripts/check_overhead.py --adapters gymnax --jax-num-envs 4096
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile

# Bare loops: the library calls a user would write, timed with perf_counter over `duration`.
BARE = {
    "gymnasium-sync": """
import gymnasium as gym, numpy as np, time
envs = gym.vector.SyncVectorEnv([lambda: make_env(ENV)] * N, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
obs, _ = envs.reset(seed=0); rng = np.random.default_rng(0); A = envs.single_action_space.n
def step():
    envs.step(rng.integers(0, A, size=N))
    return N
""",
    "envpool-sync": """
import envpool, numpy as np, time
env = envpool.make(ENV, env_type="gymnasium", num_envs=N, seed=0, **envpool_kwargs(ENV))
env.reset(); rng = np.random.default_rng(0); A = env.action_space.n
def step():
    return np.count_nonzero(env.step(rng.integers(0, A, size=N))[4]["elapsed_step"])  # resets are not steps
""",
    "envpool-async": """
import envpool, numpy as np, time
env = envpool.make(ENV, env_type="gymnasium", num_envs=N, batch_size=N // 2, seed=0, **envpool_kwargs(ENV))
env.async_reset(); rng = np.random.default_rng(0); A = env.action_space.n
def step():
    obs, rew, term, trunc, info = env.recv()
    env.send(rng.integers(0, A, size=len(obs)), info["env_id"])
    return np.count_nonzero(info["elapsed_step"])
""",
    "gymnasium-async": """
import gymnasium as gym, numpy as np, time
envs = gym.vector.AsyncVectorEnv([lambda: make_env(ENV)] * N, context="fork",
                                 autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
obs, _ = envs.reset(seed=0); rng = np.random.default_rng(0); A = envs.single_action_space.n
def step():
    envs.step(rng.integers(0, A, size=N))
    return N
""",
    # A jitted lax.scan of T steps of N vmapped gymnax envs with uniform random actions, as PureJaxRL
    # writes it; every call waits for its result. T = 128 is the gymnax adapter's default scan_T.
    "gymnax": """
import gymnax, jax, jax.numpy as jnp, time
env, params = gymnax.make(ENV); T = 128; A = env.action_space(params).n
def rollout(carry):
    def body(c, _):
        state, obs, key, ret = c
        key, k_act, k_env = jax.random.split(key, 3)
        actions = jax.random.randint(k_act, (N,), 0, A)
        obs, state, reward, _, _, _ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            jax.random.split(k_env, N), state, actions, params)
        return (state, obs, key, ret + reward), None
    return jax.lax.scan(body, carry, None, length=T)[0]
rollout = jax.jit(rollout)
key, k_reset = jax.random.split(jax.random.PRNGKey(0))
obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(k_reset, N), params)
carry = jax.block_until_ready(rollout((state, obs, key, jnp.zeros(N))))  # compile before the warm-up
def step():
    global carry
    carry = jax.block_until_ready(rollout(carry))
    return N * T
""",
}
ONLY = {"gymnax": ("CartPole-v1",)}  # envs a bare loop can run
JAX = ("gymnax",)  # sized by --jax-num-envs: vmapped envs in one program
TIMER = """
t_end = time.perf_counter() + {warmup}
while time.perf_counter() < t_end:
    step()
steps, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < {duration}:
    steps += step()
print(steps / (time.perf_counter() - t0))
"""


def bare(adapter, env, n, duration, warmup):
    code = (f"N = {n}\nENV = {env!r}\nfrom rlbench.envs import make_env, envpool_kwargs\n" + BARE[adapter]
            + TIMER.format(duration=duration, warmup=warmup))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    return float(out.stdout.strip().splitlines()[-1])


def harness(adapter, env, n, duration, warmup):
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "-m", "rlbench.cli", "run", "--adapter", adapter, "--env", env,
                        "--num-envs", str(n), "--repeats", "1", "--duration", str(duration),
                        "--out", f"{out}/run"], check=True, capture_output=True)
        row = json.loads(open(f"{out}/run/results.jsonl").readline())
        if row["status"] != "ok":
            raise RuntimeError(row)
        return row["steps_per_s"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--duration", type=float, default=2.0)
    p.add_argument("--num-envs", type=int, default=16, help="num_envs of the CPU loops")
    p.add_argument("--jax-num-envs", type=int, default=4096, help="num_envs of gymnax (vmapped on one device)")
    p.add_argument("--adapters", default=",".join(BARE))
    p.add_argument("--env", default="CartPole-v1", help="a discrete-action env: CartPole-v1, Pong-v5, ...")
    a = p.parse_args()
    print(f"{'adapter':<16} {'bare steps/s':>14} {'(CV)':>6} {'harness steps/s':>16} {'(CV)':>6} {'harness/bare':>13}")
    for adapter in a.adapters.split(","):
        if adapter in ONLY and a.env not in ONLY[adapter]:
            print(f"{adapter:<16} skipped: runs {', '.join(ONLY[adapter])} only", flush=True)
            continue
        n = a.jax_num_envs if adapter in JAX else a.num_envs
        b, h = [], []
        for i in range(a.repeats):  # alternate which goes first, so drift hits both sides alike
            for side in ((b, bare), (h, harness))[:: 1 if i % 2 == 0 else -1]:
                side[0].append(side[1](adapter, a.env, n, a.duration, 0.2))
        mb, mh = statistics.median(b), statistics.median(h)
        print(f"{adapter + f' n={n}':<16} {mb:>14,.0f} {_cv(b):>6} {mh:>16,.0f} {_cv(h):>6} {mh / mb:>13.3f}",
              flush=True)


def _cv(xs) -> str:
    return f"{statistics.stdev(xs) / statistics.mean(xs):.1%}" if len(xs) > 1 else "-"


if __name__ == "__main__":
    main()
