"""`mjx`: MuJoCo XLA (mujoco.mjx) stepping gymnasium's own MuJoCo model of an env, num_envs of them vmapped in a
compiled lax.scan, the policy inside: GPU-resident physics set beside mujoco-rollout's and EnvPool's CPU physics
on the same model file.

Physics stepping, not a vector env, as mujoco-rollout: gymnasium's observation (qpos without the leading entries
it leaves out, qvel), Ant's termination, the time limit and gymnasium's reset, each env reset inside the step that
ended it, so every step is one counted transition; the carried "return" is the torso's forward progress. MJX
keeps the model's solver, its iterations and timestep (put_model), in float32 (JAX's default), against CPU
MuJoCo's float64: the row's device_settings name them, and tests/frameworks/test_mjx.py checks that k steps
agree with CPU MuJoCo from the same state and actions. It runs in the brax environment (adapters/envs/brax.txt:
jax 0.9.2, mujoco 4.0.0, mujoco-mjx 3.17.0); the main environment imports this module for names and supports().
"""
from adapters._kit.jax_policy import make_actor
from adapters._kit.jax_runtime import JAX_OPTIONS, CompiledScan, pick_devices, scan_supports, start_jax
from adapters._kit.mujoco_envs import ENVS, RESET_NOISE, TIME_LIMIT_STEPS, gaps_to_cpu, gymnasium_model, solver_settings
from rlbench.api import Adapter, Option, register


def physics(jax, model, frameskip, spec):
    """(mjx model, reset(key) -> data, env_step(data, t, action, key) -> (data, t, progress, done),
    observe(data) -> obs) of one env, as gymnasium's v4 env steps it."""
    import jax.numpy as jnp
    from mujoco import mjx
    m = mjx.put_model(model)
    fresh = mjx.make_data(m)            # as mj_resetData leaves it: qpos0, zeros
    nq, nv, skip, healthy = model.nq, model.nv, spec["obs_skip_qpos"], spec["healthy_z"]
    dt = float(model.opt.timestep) * frameskip

    def reset(key):
        """gymnasium's reset_model: qpos0 + U(-noise, noise), qvel + noise * N(0, 1)."""
        k_pos, k_vel = jax.random.split(key)
        return fresh.replace(qpos=fresh.qpos + jax.random.uniform(k_pos, (nq,), minval=-RESET_NOISE,
                                                                   maxval=RESET_NOISE),
                             qvel=fresh.qvel + RESET_NOISE * jax.random.normal(k_vel, (nv,)))

    def advance(d, action):
        """do_simulation: the action held for frameskip physics steps."""
        d = d.replace(ctrl=action)
        return jax.lax.fori_loop(0, frameskip, lambda _, x: mjx.step(m, x), d)

    def env_step(d, t, action, key):
        x0 = d.qpos[0]
        d = advance(d, action)
        t = t + 1
        done = t >= TIME_LIMIT_STEPS
        if healthy is not None:
            z = d.qpos[2]
            finite = jnp.isfinite(d.qpos).all() & jnp.isfinite(d.qvel).all()
            done = done | ~finite | (z < healthy[0]) | (z > healthy[1])
        progress = (d.qpos[0] - x0) / dt
        d = jax.tree.map(lambda new, old: jnp.where(done, new, old), reset(key), d)
        return d, jnp.where(done, 0, t), progress, done

    def observe(d):
        return jnp.concatenate([d.qpos[skip:], d.qvel])

    return m, reset, advance, env_step, observe


def physics_settings(model, frameskip) -> dict:
    """What the row records of the physics it stepped."""
    return {**solver_settings(model), "frame_skip": frameskip, "precision": "float32", "impl": "jax"}


class MJXSession(CompiledScan):
    """One unit: scan_T steps of all num_envs envs, policy included, one compiled call."""
    returns_at = 3

    def __init__(self, workload, options):
        jax, settings = start_jax(options)
        import jax.numpy as jnp
        import numpy as np
        self.jax = jax
        devices = pick_devices(jax, workload, options, workload.num_envs, "num_envs")
        model, frameskip, _, action_space = gymnasium_model(workload)
        _, reset, _, env_step, observe = physics(jax, model, frameskip, ENVS[workload.env_id])
        T, n, d = options["scan_T"], workload.num_envs, len(devices)
        low, high = (np.asarray(b, np.float32) for b in (action_space.low, action_space.high))
        params, act = make_actor(jax, workload, (model.nq - ENVS[workload.env_id]["obs_skip_qpos"] + model.nv,),
                                 ("box", low, high))
        step_env = jax.vmap(env_step)

        def unit(carry, params):  # one device's envs
            def body(c, _):
                data, t, key, ret = c
                key, k_act, k_env = jax.random.split(key[0], 3)
                action = act(params, jax.vmap(observe)(data), k_act)
                data, t, progress, _ = step_env(data, t, action, jax.random.split(k_env, t.shape[0]))
                return (data, t, key[None], ret + progress), None
            return jax.lax.scan(body, carry, None, length=T)[0]

        keys = jax.random.split(jax.random.PRNGKey(workload.seed), n + d)
        data = jax.jit(jax.vmap(reset))(keys[:n])
        carry = (data, jnp.zeros((n,), jnp.int32), keys[n:], jnp.zeros((n,), jnp.float32))
        compile_s = self.compile(unit, carry, params, devices)
        self.per_unit = T * n
        self.info = {"compile_s": compile_s, "device": devices[0].platform, "workers": d,
                     "device_settings": {**settings, "devices": d, "physics": physics_settings(model, frameskip)}}


@register
class MJX(Adapter):
    name = "mjx"
    kind = "vector_env"
    environment = "brax"
    description = ("MuJoCo XLA: gymnasium's MuJoCo model in mjx, vmap over num_envs, lax.scan over scan_T env "
                   "steps (frame skip physics steps each), gymnasium's termination and reset inside, random or "
                   "MLP actions, AOT-compiled")
    requires = ("mujoco", "jax")
    options = (Option("scan_T", int, 16, "env steps per unit (one lax.scan; each of num_envs envs)", low=1),
               *JAX_OPTIONS)

    def supports(self, workload, options):
        if workload.env_id not in ENVS:
            return f"mjx steps gymnasium's MuJoCo models of {', '.join(ENVS)}, not {workload.env_id}"
        return scan_supports(workload, options, self.name)

    def open(self, workload, options):
        return MJXSession(workload, options)

    def tune_space(self, num_envs: int, cpus: int) -> list:
        """scan length: longer amortises the call; each step is frame_skip physics steps already."""
        return [{"scan_T": t} for t in (4, 16, 64)]


def states_gap(env_id: str = "Ant-v4", steps: int = 20, seed: int = 0, cone: str = "model") -> list:
    """MJX (float32) against CPU MuJoCo, from one reset state (drawn in JAX) under one random action sequence
    (adapters._kit.mujoco_envs.gaps_to_cpu): the adapter's physics check (tests/frameworks/test_mjx.py)."""
    import jax
    import numpy as np

    def start(model, frameskip, rng):
        _, reset, advance, _, _ = physics(jax, model, frameskip, ENVS[env_id])
        d, step = jax.jit(reset)(jax.random.PRNGKey(seed)), jax.jit(advance)
        state = {"d": d}

        def advance_one(action):
            state["d"] = step(state["d"], action)
            return state["d"].qpos, state["d"].qvel
        return np.asarray(d.qpos, np.float64), np.asarray(d.qvel, np.float64), advance_one
    return gaps_to_cpu(env_id, steps, seed, cone, start)
