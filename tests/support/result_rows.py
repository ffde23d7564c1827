"""Hand-made result rows, and a ResultSet of them covering stepping, learners and JAX cells: what the report,
compare, headline and tune tests build their runs from."""
from rlbench.results.model import ResultSet, frames


def _row(adapter, n, repeat, rate, kind="vector_env", **extra):
    row = {"schema": 1, "run_id": "r", "suite": "hand", "cell_id": f"{adapter}/CartPole-v1/n={n}/random",
           "cell_index": 0, "adapter": adapter, "kind": kind, "env": "CartPole-v1", "env_kwargs": {}, "num_envs": n,
           "workers": None, "batch_size": None, "policy": "random", "device": "cpu", "options": {}, "frameskip": 1,
           "seed": 0, "repeat": repeat, "profiled": False, "status": "ok", "error": None, "cpus": 2,
           "env_steps": int(rate), "units": 10, "seconds": 1.0, "steps_per_s": rate * (1 + 0.01 * repeat),
           "latency_p50_ms": 1.0, "latency_p99_ms": 3.0, "policy_s": 0.1, "cpu_util": 1.0, "peak_rss_mb": 50.0}
    return frames({**row, **extra})


def results() -> ResultSet:
    rows = []
    for rep in range(3):
        rows += [_row("serial", 1, rep, 1000.0), _row("serial", 4, rep, 1000.0),
                 _row("gymnasium-async", 4, rep, 1600.0),
                 _row("impala", 8, rep, 20000.0, kind="learner", updates_per_s=150.0, samples_per_s=20000.0,
                      policy_lag_mean=1.5, policy_lag_max=4, env_frac=0.2, inference_frac=0.5, learn_frac=0.3,
                      policy_lag_hist=[10, 20, 5])]
        for agents, rate_ in ((1, 50000.0), (8, 300000.0)):
            rows.append(_row("purejaxrl-ppo", 4, rep, rate_, kind="learner", compile_s=2.5, setup_s=3.0,
                             options={"num_agents": agents}, updates_per_s=10.0,
                             cell_id=f"purejaxrl-ppo/CartPole-v1/n=4/random/num_agents={agents}"))
    return ResultSet.from_rows(rows, {"cpu_model": "x"})
