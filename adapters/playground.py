"""`playground`: MuJoCo Playground's DeepMind Control envs through its own reset and step, wrapped as its trainers
wrap them (wrapper.wrap_for_brax_training: vmap, episode limit, auto-reset), num_envs of them in a compiled lax.scan
with the policy inside, with either of its physics implementations (impl jax: MJX; impl warp: MuJoCo Warp through
MJX's FFI).

EnvPool steps the same tasks on dm_control's own files under the same ids (CheetahRun-v1, HumanoidWalk-v1, ...:
the tasks whose control step and physics timestep the two share), so they compare on one env id. Playground's
models are dm_control's bodies and geometry with its own solver settings (cheetah: 4 solver and 8 line-search
iterations against dm_control's 100 and 50, Euler damping off): each row names them (device_settings.physics).
Its locomotion and manipulation envs are not here: they load robots from mujoco_menagerie, which Playground
git-clones from GitHub on first use.

It runs in the brax environment (adapters/envs/brax.txt: jax 0.9.2, brax 0.14.2, playground 0.2.0, warp-lang
1.19.0); the main environment imports this module for names and supports() only.
"""
from time import perf_counter

from adapters._kit.jax_policy import make_actor
from adapters._kit.jax_runtime import JAX_OPTIONS, CompiledScan, pick_devices, scan_supports, start_jax
from adapters._kit.playground_envs import IMPL, TASKS, load_env, physics_settings
from rlbench.api import Adapter, Option, register


class PlaygroundSession(CompiledScan):
    """One unit: scan_T env steps of all num_envs wrapped Playground envs, policy included, one compiled call."""
    returns_at = 2

    def __init__(self, workload, options):
        jax, settings = start_jax(options)
        import jax.numpy as jnp
        import numpy as np
        from mujoco_playground import wrapper
        self.jax = jax
        devices = pick_devices(jax, workload, options, workload.num_envs, "num_envs")
        name = TASKS[workload.env_id]
        t0 = perf_counter()
        raw, config = load_env(name, options["impl"])
        episode_length = options["episode_length"] or int(config.episode_length)
        env = wrapper.wrap_for_brax_training(raw, episode_length=episode_length,
                                             action_repeat=int(config.get("action_repeat", 1)),
                                             full_reset=options["full_reset"])
        obs_size = raw.observation_size
        if isinstance(obs_size, dict):    # the actor's part of a dict observation, as Playground's PPO reads it
            obs_size = obs_size["state"]
        low = -np.ones((raw.action_size,), np.float32)
        params, act = make_actor(jax, workload, tuple(np.atleast_1d(obs_size)), ("box", low, -low))
        T, n, d = options["scan_T"], workload.num_envs, len(devices)

        def actor_obs(obs):
            return obs["state"] if isinstance(obs, dict) else obs

        def unit(carry, params):  # one device's envs
            def body(c, _):
                state, key, ret = c
                key, k_act = jax.random.split(key[0])
                state = env.step(state, act(params, actor_obs(state.obs), k_act))
                return (state, key[None], ret + state.reward), None
            return jax.lax.scan(body, carry, None, length=T)[0]

        keys = jax.random.split(jax.random.PRNGKey(workload.seed), n + d)
        state = jax.jit(env.reset)(keys[:n])
        jax.block_until_ready(state)
        reset_s = perf_counter() - t0     # loading the model, compiling the reset and running it
        carry = (state, keys[n:], jnp.zeros((n,), jnp.float32))   # one loop key per device
        compile_s = self.compile(unit, carry, params, devices)
        self.per_unit = T * n
        self.info = {"compile_s": compile_s, "device": devices[0].platform, "workers": d,
                     "device_settings": {**settings, "devices": d, "playground_env": name,
                                         "episode_length": episode_length, "full_reset": options["full_reset"],
                                         "load_and_reset_s": reset_s,
                                         "physics": physics_settings(raw, config)}}


@register
class Playground(Adapter):
    name = "playground"
    kind = "vector_env"
    environment = "brax"
    description = ("MuJoCo Playground envs (jax): its wrap_for_brax_training (vmap, episode limit, auto-reset), "
                   "lax.scan over scan_T steps, random or MLP actions inside, AOT-compiled; impl jax (MJX) or "
                   "warp (MuJoCo Warp)")
    requires = ("mujoco_playground", "jax")
    unit_option = "scan_T"
    options = (Option("scan_T", int, 16, "env steps per unit (one lax.scan; each of num_envs envs)", low=1),
               IMPL,
               Option("full_reset", bool, False, "an ended env runs env.reset (True) or takes the cached first "
                                                 "state (False, Playground's default): what a reset costs"),
               Option("episode_length", int, 0, "steps before an episode is cut; 0 = the env's config", low=0),
               *JAX_OPTIONS)

    def supports(self, workload, options):
        if workload.env_id not in TASKS:
            return f"playground has no env {workload.env_id} (valid: {', '.join(TASKS)})"
        return scan_supports(workload, options, self.name)

    def open(self, workload, options):
        return PlaygroundSession(workload, options)

    def tune_space(self, num_envs: int, cpus: int) -> list:
        return [{"scan_T": t} for t in (4, 16, 64)]
