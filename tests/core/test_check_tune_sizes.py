"""check-tune at any core count: its default sizes grow with the cores, and an exhaustive sweep too large for
the machine keeps every other size (the largest always), saying so; forward_s gives autotune the policy's
profiled cost."""
import sys
from types import SimpleNamespace

import pytest
from support import REPO

sys.path.insert(0, str(REPO / "scripts"))
import check_tune  # noqa: E402


def test_default_sizes_reach_64_per_core_up_to_1024():
    assert check_tune.default_sizes(2) == [1, 2, 4, 8, 16, 32, 64, 128]
    assert check_tune.default_sizes(16)[-1] == 1024 and check_tune.default_sizes(64)[-1] == 1024


def test_a_sweep_that_fits_keeps_every_size_and_one_that_does_not_thins_from_the_top():
    sizes = check_tune.default_sizes(16)                      # 1 .. 1024: 11 sizes
    assert check_tune.sized(sizes, 10, cap=120) == (sizes, "")
    kept, note = check_tune.sized(sizes, 20, cap=120)         # 220 > 120: every other size
    assert kept == [1, 4, 16, 64, 256, 1024] and len(kept) * 20 <= 120
    assert note.startswith("swept every 2th size (1, 4, 16, 64, 256, 1024) of 11: 220 configurations")
    kept, _ = check_tune.sized(sizes, 40, cap=120)
    assert kept[-1] == 1024 and len(kept) * 40 <= 120


def test_autotune_stands_in_for_the_cnn_with_its_profiled_cost():
    record = {"profile": {"policy_us_per_batch": {"1": 900.0, "8": 2000.0, "64": 12800.0}}}
    args = SimpleNamespace(puffer_batch_size=48, sizes=[1, 64])
    assert check_tune.forward_s("cnn", record, args) == pytest.approx(12800e-6 * 48 / 64)  # the nearest batch measured, scaled
    assert check_tune.forward_s("fixed_cost:cost_us=200", record, args) == 200e-6
    assert check_tune.forward_s("random", {"profile": {}}, args) == 0.0


def test_the_sweep_covers_every_strategy_tune_measured_not_only_its_finalists():
    """On Pong tune measured ALE's vector env (3 repeats, then dropped) and the sweep left it out: a strategy
    tune dropped on its repeats is swept too, so the sweep can say the drop was wrong; one never measured is not."""
    record = {"candidates": [{"adapter": "rlpyt-cpu", "status": "finalist", "repeats": 4},
                             {"adapter": "ale-vector", "status": "dropped", "repeats": 3},
                             {"adapter": "tianshou-ray", "status": "budget", "repeats": 0}],
              "decision": {"winner": {"adapter": "rlpyt-cpu"}}}
    assert check_tune._with_raced("serial,gymnasium-async", record).split(",") == \
        ["serial", "gymnasium-async", "rlpyt-cpu", "ale-vector"]


def test_the_runner_up_counts_as_named_only_where_the_answer_did_not_separate_it():
    """tune's answer names its runner-up beside its pick where the lead is not significant (minigrid: rlpyt-cpu at
    64 and at 32 envs, 0.92x [0.76, 1.04]); the sweep's best among those two is found, not missed. A significant
    lead names only the pick."""
    runner = {"cell_id": "b/n=8", "adapter": "gymnasium-async", "num_envs": 8, "options": {}}
    record = {"candidates": [{"cell_id": "a/n=16", "adapter": "sb3-subproc", "num_envs": 16, "options": {}}, runner],
              "decision": {"runner_up": {"cell_id": "b/n=8", "lead": "not significant"}}}
    assert check_tune._named_tie(record) == [runner]
    record["decision"]["runner_up"]["lead"] = "significant"
    assert check_tune._named_tie(record) == []
    assert check_tune._named_tie({"decision": {"runner_up": None}}) == []
