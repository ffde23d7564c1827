"""Policies: the batch of actions is computed once per vector step inside the timed unit, and its
time is recorded apart from the env's."""
import numpy as np
import pytest
from support import TINY, run_cli

from rlbench import registry
from rlbench.workload import PolicySpec, Workload, parse_policy


@pytest.mark.parametrize("policy", ["random", "fixed_cost:cost_us=200", "mlp:hidden=16x16,threads=1"])
def test_policy_time_is_split_from_env_time(tmp_path, policy):
    run = run_cli(["run", "--adapter", "gymnasium-sync", "--env", "CartPole-v1", "--num-envs", "4",
                   "--policy", policy, *TINY], tmp_path / "run")
    [row] = run.rows
    assert row["status"] == "ok", row.get("error")
    assert 0 < row["policy_s"] < row["seconds"]
    assert row["policy_s"] + row["env_s"] == pytest.approx(row["seconds"])
    if policy.startswith("fixed_cost"):  # 200 us of busy work per unit is at least that much policy time
        assert row["policy_s"] >= row["units"] * 200e-6


def test_mlp_on_cuda_without_a_device_is_unsupported(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    run = run_cli(["run", "--adapter", "serial", "--env", "CartPole-v1", "--num-envs", "2",
                   "--policy", "mlp:device=cuda", *TINY], tmp_path / "run")
    assert run.rc == 0
    assert [(r["status"], r["error"], r["device"]) for r in run.rows] == [("unsupported", "no CUDA device", "cuda")]


def test_mlp_acts_on_the_whole_batch_with_valid_actions():
    pytest.importorskip("torch")
    session = registry.get("gymnasium-sync")().open(
        Workload("CartPole-v1", 5, parse_policy("mlp:hidden=8,threads=1")), {})
    try:
        actions = session.policy(session.obs)
        assert actions.shape == (5,) and set(np.unique(actions)) <= {0, 1}
        assert session.step() == 5
    finally:
        session.close()


def test_policy_labels_name_what_ran():
    assert PolicySpec().label == "random"
    assert parse_policy("fixed_cost:cost_us=50").label == "fixed_cost50us"
    assert parse_policy({"name": "mlp", "hidden": [32, 32], "threads": 2}).label == "mlp32x32-cpu-t2"
