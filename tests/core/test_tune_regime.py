"""What bounds tune's winner, read from the env's profile and the winner's split of time: the policy, the env's
compute on the cores there are, moving big observations between processes, the calls between processes, or one
process stepping every env; each said with its figure and what would move it."""
from rlbench.tuning.profile import EnvProfile
from rlbench.tuning.regime import regime


def _profile(step_us=100.0, obs_bytes=64, jax=False):
    doc = {"step": {"median_us": step_us}, "obs_bytes": obs_bytes, "policy_us_per_batch": {"1": 5.0}}
    return EnvProfile.from_json({**doc, "api": "gymnax", "adapter": "gymnax"} if jax else doc)


def _rows(seconds=1.0, steps=10_000, policy_s=0.0, util=1.0, cpus=2, workers=2):
    return [{"seconds": seconds, "env_steps": steps, "policy_s": policy_s, "cpu_util": util, "cpus": cpus,
             "workers": workers}] * 3


def test_a_network_that_takes_most_of_the_time_is_the_bound():
    got = regime(_rows(policy_s=0.87), _profile(), gpu_option=False)
    assert got.kind == "policy-bound" and got.figure == "87% of the winner's time in the policy"
    assert "none here" in got.lever
    assert regime(_rows(policy_s=0.87), _profile(), gpu_option=True).lever == "the policy on the GPU would move it"


def test_one_process_on_several_cores_says_the_others_idle():
    got = regime(_rows(workers=1, util=1.0), _profile(step_us=2.0), gpu_option=False)
    assert got.kind == "one-process" and "1 of 2 cores idle" in got.figure


def test_workers_that_keep_every_core_busy_on_the_envs_own_step_are_env_bound():
    # 10,000 steps in 1 s: 100 us per step outside the policy; the env's own 200 us over 2 workers is 100 us
    got = regime(_rows(util=1.9), _profile(step_us=200.0), gpu_option=False)
    assert got.kind == "env-bound" and got.figure.startswith("1.9 of 2 cores busy at 100.00 us per env step")
    assert got.lever == "more cores (or a cheaper env step) would move it"


def test_big_observations_moved_between_processes_are_the_bound_small_ones_the_calls():
    # 100 us per step outside the policy against the env's own 20 us over 2 workers (10 us)
    big = regime(_rows(util=1.2), _profile(step_us=20.0, obs_bytes=28_224), gpu_option=False)
    assert big.kind == "transfer-bound" and "28224 B observations" in big.figure
    small = regime(_rows(util=1.2), _profile(step_us=20.0), gpu_option=False)
    assert small.kind == "overhead-bound" and "1.2 of 2 cores busy" in small.figure


def test_nothing_is_said_without_rows_or_for_a_compiled_jax_loop():
    assert regime([], _profile(), gpu_option=False) is None
    assert regime(_rows(), _profile(jax=True), gpu_option=False) is None
