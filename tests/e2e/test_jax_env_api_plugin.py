"""A JAX env API is a plug-in: an installed package declares one in the `rlbench.jax_env_apis` entry-point group
(rlbench.api.JaxEnvApi: detect, spaces, load), and a user's env of that API runs on gymnax with gymnax's
accounting, nothing of rlbench/ changed; every gymnasium adapter is dropped while planning naming the API. The
package here is a fake installed distribution; planning and the cell run in `rlbench` subprocesses (JAX never
starts in the test runner)."""
import importlib.util

import pytest
from support import run_cli_subprocess
from support._dist import fake_distribution

MISSING = [m for m in ("jax", "gymnax") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"not installed: {', '.join(MISSING)}")

# a corridor whose API is its own: begin(key) -> (obs, state), advance(state, action) -> (obs, state, reward, done),
# n_moves and obs_length; JAX imported inside its calls only, so planning reads it without JAX
STEPPER = '''
from adapters._kit.jax_env import FunctionalEnv
from rlbench.api import JaxEnvApi


class Corridor:
    n_moves = 3      # left, stay, right
    obs_length = 2   # steps walked, steps left

    def __init__(self, length):
        self.length = length

    def begin(self, key):
        import jax.numpy as jnp
        return self._obs(jnp.int32(0)), jnp.int32(0)

    def advance(self, state, action):
        import jax.numpy as jnp
        pos = jnp.clip(state + action - 1, 0, self.length).astype(jnp.int32)
        done = pos >= self.length
        return self._obs(pos), pos, done.astype(jnp.float32), done

    def _obs(self, pos):
        import jax.numpy as jnp
        return jnp.stack([pos, self.length - pos]).astype(jnp.float32)


def make(length: int = 6):
    return Corridor(length)


class Stepper(JaxEnvApi):   # no decorator: the entry point names the class
    name = "stepper"
    title = "the stepper's"
    description = "begin(key), advance(state, action), n_moves, obs_length"

    def detect(self, env):
        return all(callable(getattr(env, m, None)) for m in ("begin", "advance")) and \\
            all(hasattr(env, a) for a in ("n_moves", "obs_length"))

    def spaces(self, env, params):
        import gymnasium as gym
        import numpy as np
        return gym.spaces.Box(-np.inf, np.inf, (env.obs_length,), np.float32), gym.spaces.Discrete(env.n_moves)

    def load(self, jax, env, params):
        import jax.numpy as jnp

        def step(key, state, action):   # a finished corridor starts again inside the step that finished it
            obs, state, reward, done = env.advance(state, action)
            fresh_obs, fresh = env.begin(key)
            return jnp.where(done, fresh_obs, obs), jnp.where(done, fresh, state), reward, done

        return FunctionalEnv(env.begin, step, ("discrete", env.n_moves), env.obs_length, 4 * env.obs_length,
                             100, self.name)
'''


def test_an_installed_jax_env_api_runs_on_gymnax_and_is_refused_by_gymnasium_adapters(tmp_path):
    env = fake_distribution(tmp_path, "rlbench_stepper", {"stepper": "stepper_api:Stepper"},
                            {"stepper_api": STEPPER}, group="rlbench.jax_env_apis")
    run = run_cli_subprocess(["run", "--adapter", "gymnax", "--env", "stepper_api:make", "--num-envs", "4",
                              "--opt", "scan_T=4", "--repeats", "1", "--duration", "0.2", "--warmup", "0.1"],
                             tmp_path / "run", env=env, cwd=tmp_path, timeout=300)
    assert run.rc == 0, run.stderr[-3000:]
    row = run.row("gymnax")
    assert row["status"] == "ok", row
    assert row["env_api"] == "stepper"
    assert row["env_steps"] > 0 and row["env_steps"] == row["units"] * 4 * 4   # units x num_envs x scan_T

    dropped = run_cli_subprocess(["run", "--adapter", "serial", "--env", "stepper_api:make", "--repeats", "1"],
                                 tmp_path / "dropped", env=env, cwd=tmp_path)
    assert dropped.rc == 2 and not (tmp_path / "dropped").exists()
    assert ("stepper_api:make is a JAX env (stepper API): serial steps gymnasium envs; JAX envs of this API run on "
            "gymnax, purejaxrl-ppo") in dropped.stderr
