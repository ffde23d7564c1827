"""`rlbench report DIR --format pytest-benchmark`: DIR/pytest-benchmark.json, in the JSON schema that
pytest-benchmark (5.3.1) saves with --benchmark-json or --benchmark-save, so its own tools read rlbench runs.
One cell is one benchmark, one ok repeat one round of seconds per env step; the same run always exports the same
file. How a run maps onto the schema: docs/compare.md, "How a run maps onto pytest-benchmark's schema".
"""
import json
import math
import statistics
from bisect import bisect_left, bisect_right

from rlbench.workload import kv_label

FILENAME = "pytest-benchmark.json"
SCHEMA_VERSION = "5.3.1"   # the pytest-benchmark release whose saved-JSON schema this writes
METRIC = "steps_per_s"
# pytest_benchmark.stats.Stats.fields, in its order
STATS_FIELDS = ("min", "max", "mean", "stddev", "rounds", "median", "iqr", "q1", "q3", "iqr_outliers",
                "stddev_outliers", "outliers", "ld15iqr", "hd15iqr", "ops", "total")


def to_json(results) -> str:
    """The pytest-benchmark JSON of a ResultSet (rlbench.results.model)."""
    record, env = results.record, results.record.machine
    benchmarks, left_out = [], []
    for cell_id, cell in results.cells.items():  # computed once, in the suite's order
        rounds = [r for r in results.benchmarks[cell_id].ok_runs if _positive(r.get(METRIC))]
        if not rounds:
            left_out.append({"cell_id": cell_id, "status": cell.status, "error": cell.error or None})
            continue
        benchmarks.append(_benchmark(cell_id, rounds, cell, record.settings))
    doc = {
        "machine_info": machine_info(env),
        "commit_info": commit_info(env),
        "benchmarks": benchmarks,
        "datetime": record.ended_at or env.get("started_at"),
        "version": SCHEMA_VERSION,
        "rlbench": {"version": env.get("rlbench_version"), "run_id": record.run_id or None, "left_out": left_out,
                    "round": "one ok repeat; its value is seconds per env step (1 / steps_per_s)"},
    }
    return json.dumps(_finite(doc), indent=4, ensure_ascii=True, allow_nan=False) + "\n"


def export_pytest_benchmark(view) -> dict:
    """DIR/pytest-benchmark.json (`rlbench report DIR --format pytest-benchmark`) of a RunView
    (rlbench.report.view), as bytes."""
    return {FILENAME: to_json(view.results).encode()}


def _benchmark(cell_id: str, runs: list, cell, settings: dict) -> dict:
    first = runs[0]
    env_id = str(first.env) + (f"({kv_label(first.env_kwargs)})" if first.env_kwargs else "")
    params = {"adapter": first.adapter, "env": first.env, "num_envs": first.num_envs, "policy": first.policy,
              "options": first.options or {}}
    if first.env_kwargs:
        params["env_kwargs"] = first.env_kwargs
    extra = {
        "unit": "seconds per env step (1 / steps_per_s); one round = one repeat in a fresh process",
        **{k: cell.value(k) for k in ("adapter", "kind", "env", "env_kwargs", "num_envs", "policy", "options",
                                       "device", "frameskip", "status", "n", "steps_per_s_median",
                                       "steps_per_s_ci_low", "steps_per_s_ci_high", "ci_method", "steps_per_s_cv",
                                       "frames_per_s_median", "warning")},
        "env_steps": [r.env_steps for r in runs],
    }
    data = [1.0 / r[METRIC] for r in runs]
    return {
        "group": f"{env_id}/n={first.num_envs}/{first.policy}",
        "name": cell_id,
        "fullname": cell_id,
        "params": params,
        "param": cell_id,
        "extra_info": extra,
        "options": dict(settings),
        "stats": {**stats(data), "data": data, "iterations": 1},
    }


def stats(data: list) -> dict:
    """pytest_benchmark.stats.Stats.as_dict() of these rounds, computed the way it computes them."""
    x = sorted(data)
    n = len(x)
    mean = statistics.mean(x)
    stddev = statistics.stdev(x) if n > 1 else 0
    if n == 1:
        q1 = q3 = x[0]
    elif n % 2:  # its quartiles: method 3 for an odd count, method 2 (medians of the halves) for an even one
        k, r = n // 4, n % 4
        q1 = 0.25 * x[k - 1] + 0.75 * x[k] if r == 1 else 0.75 * x[k] + 0.25 * x[k + 1]
        q3 = 0.75 * x[3 * k] + 0.25 * x[3 * k + 1] if r == 1 else 0.25 * x[3 * k + 1] + 0.75 * x[3 * k + 2]
    else:
        q1, q3 = statistics.median(x[: n // 2]), statistics.median(x[n // 2:])
    iqr = q3 - q1
    iqr_outliers = sum(v < q1 - 1.5 * iqr or v > q3 + 1.5 * iqr for v in x)
    stddev_outliers = sum(v < mean - stddev or v > mean + stddev for v in x)
    total = sum(data)
    return {
        "min": x[0], "max": x[-1], "mean": mean, "stddev": stddev, "rounds": n, "median": statistics.median(x),
        "iqr": iqr, "q1": q1, "q3": q3, "iqr_outliers": iqr_outliers, "stddev_outliers": stddev_outliers,
        "outliers": f"{stddev_outliers};{iqr_outliers}",
        "ld15iqr": x[0] if n == 1 else x[bisect_left(x, q1 - 1.5 * iqr)],
        "hd15iqr": x[0] if n == 1 else x[bisect_right(x, q3 + 1.5 * iqr) - 1],
        "ops": n / total if total else 0, "total": total,
    }


def machine_info(env: dict) -> dict:
    """pytest-benchmark's machine_info keys, filled from env.json (null where it has no such figure), plus
    what rlbench records of the machine."""
    system = (env.get("os") or "").split("-")[0] or None
    return {
        "node": env.get("hostname"), "processor": env.get("cpu_model"), "machine": None,
        "python_compiler": None, "python_implementation": None, "python_implementation_version": env.get("python"),
        "python_version": env.get("python"), "python_build": None, "release": env.get("kernel"), "system": system,
        "cpu": {"brand_raw": env.get("cpu_model"), "count": env.get("cpu_logical_cores"),
                "physical_cores": env.get("cpu_physical_cores"), "max_mhz": env.get("cpu_freq_mhz"),
                "governor": env.get("cpu_governor")},
        "platform": env.get("os"), "ram_gb": env.get("ram_gb"),
        "gpus": [g.get("name") for g in env.get("gpus") or [] if isinstance(g, dict)],
    }


def commit_info(env: dict) -> dict:
    """pytest-benchmark's commit_info: the rlbench commit the run was made with (env.json `git`)."""
    git = env.get("git") if isinstance(env.get("git"), dict) else {}
    return {"id": git.get("commit") or "unversioned", "time": None, "author_time": None,
            "dirty": bool(git.get("dirty")), "project": "rlbench", "branch": "(unknown)"}


def _positive(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def _finite(value):
    """NaN and infinities as null: the file stays strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
