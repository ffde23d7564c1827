"""`mjx`: MuJoCo XLA (mujoco.mjx) stepping gymnasium's own MuJoCo model of an env, num_envs of them vmapped in a
compiled lax.scan, the policy inside: GPU-resident physics set beside mujoco-rollout's and EnvPool's CPU physics
on the same model file.

Physics stepping, not a vector env, as mujoco-rollout: gymnasium's observation (qpos without the leading entries
it leaves out, qvel, and Humanoid's MjData fields), its termination, the time limit and gymnasium's reset, each env
reset inside the step that ended it, so every step is one counted transition; the carried "return" is the torso's
forward progress. MJX keeps the model's solver (Newton in place of PGS, which MJX lacks: Humanoid-v4), its
iterations and timestep (put_model), in float32 (JAX's default), against CPU MuJoCo's float64: the row's
device_settings name them, and tests/frameworks/test_mjx.py checks that k steps agree with CPU MuJoCo from the
same state and actions. It runs in the brax environment (adapters/envs/brax.txt:
jax 0.9.2, mujoco 4.0.0, mujoco-mjx 3.17.0); the main environment imports this module for names and supports().
"""
from adapters._kit.jax_policy import make_actor
from adapters._kit.jax_runtime import JAX_OPTIONS, CompiledScan, pick_devices, scan_supports, start_jax
from adapters._kit.mujoco_envs import (
    ENVS,
    GPU_SOLVERS,
    episode_ends,
    gaps_to_cpu,
    gymnasium_model,
    obs_size,
    observation,
    set_solver,
    solver_settings,
)
from rlbench.api import Adapter, Option, register


def physics(jax, model, frameskip, env_id):
    """(mjx model, reset(key) -> data, advance(data, action) -> data, env_step(data, t, action, key) ->
    (data, t, progress, done), observe(data) -> obs) of one env, as gymnasium's v4 env steps it."""
    import jax.numpy as jnp
    from mujoco import mjx
    m = mjx.put_model(model)
    fresh = mjx.make_data(m)            # as mj_resetData leaves it: qpos0, zeros
    spec = ENVS[env_id]
    nq, nv, scale, fields = model.nq, model.nv, spec["reset_noise"], spec["obs_fields"]
    dt = float(model.opt.timestep) * frameskip

    def reset(key):
        """gymnasium's reset_model: qpos0 + U(-noise, noise), qvel + noise * N(0, 1) (Humanoid: U(-noise,
        noise)); where the observation reads MjData fields, mj_forward at that state (set_state's), cfrc_ext
        left zero as mj_resetData leaves it."""
        k_pos, k_vel = jax.random.split(key)
        dqvel = (jax.random.uniform(k_vel, (nv,), minval=-scale, maxval=scale) if spec["qvel_noise"] == "uniform"
                 else scale * jax.random.normal(k_vel, (nv,)))
        d = fresh.replace(qpos=fresh.qpos + jax.random.uniform(k_pos, (nq,), minval=-scale, maxval=scale),
                          qvel=fresh.qvel + dqvel)
        if not fields:
            return d
        d = mjx.forward(m, d)
        return d.replace(_impl=d._impl.replace(cfrc_ext=fresh._impl.cfrc_ext))

    def advance(d, action):
        """do_simulation: the action held for frameskip physics steps (then mj_rnePostConstraint, for cfrc_ext)."""
        d = d.replace(ctrl=action)
        d = jax.lax.fori_loop(0, frameskip, lambda _, x: mjx.step(m, x), d)
        return mjx.rne_postconstraint(m, d) if "cfrc_ext" in fields else d

    def env_step(d, t, action, key):
        x0 = d.qpos[0]
        d = advance(d, action)
        t = t + 1
        done = episode_ends(jnp, env_id, t, d.qpos, d.qvel)
        progress = (d.qpos[0] - x0) / dt
        d = jax.tree.map(lambda new, old: jnp.where(done, new, old), reset(key), d)
        return d, jnp.where(done, 0, t), progress, done

    def observe(d):
        return observation(jnp, env_id, d.qpos[None], d.qvel[None], {k: field(d, k)[None] for k in fields})[0]

    return m, reset, advance, env_step, observe


def field(d, name: str):
    """An MjData field of mjx's Data: public (qfrc_actuator, cvel) or its JAX implementation's (cinert, cfrc_ext)."""
    return getattr(d, name) if hasattr(d, name) else getattr(d._impl, name)


def physics_settings(model, frameskip, replaced) -> dict:
    """What the row records of the physics it stepped."""
    return {**solver_settings(model), "frame_skip": frameskip, "precision": "float32", "impl": "jax", **replaced}


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
        replaced = set_solver(model, options["solver"], "mjx", GPU_SOLVERS)
        _, reset, _, env_step, observe = physics(jax, model, frameskip, workload.env_id)
        T, n, d = options["scan_T"], workload.num_envs, len(devices)
        low, high = (np.asarray(b, np.float32) for b in (action_space.low, action_space.high))
        params, act = make_actor(jax, workload, (obs_size(model, workload.env_id),), ("box", low, high))
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
                     "device_settings": {**settings, "devices": d,
                                         "physics": physics_settings(model, frameskip, replaced)}}


@register
class MJX(Adapter):
    name = "mjx"
    kind = "vector_env"
    environment = "brax"
    description = ("MuJoCo XLA: gymnasium's MuJoCo model in mjx, vmap over num_envs, lax.scan over scan_T env "
                   "steps (frame skip physics steps each), gymnasium's termination and reset inside, random or "
                   "MLP actions, AOT-compiled")
    requires = ("mujoco", "jax")
    unit_option = "scan_T"
    options = (Option("scan_T", int, 16, "env steps per unit (one lax.scan; each of num_envs envs)", low=1),
               Option("solver", str, "model", "constraint solver: model = the model's own, Newton where that is "
                                              "PGS (MJX has none: Humanoid-v4), or newton / cg",
                      choices=GPU_SOLVERS),
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


def states_gap(env_id: str = "Ant-v4", steps: int = 20, seed: int = 0, cone: str = "model",
               solver: str = "model") -> list:
    """MJX (float32) against CPU MuJoCo, from one reset state (drawn in JAX) under one random action sequence
    (adapters._kit.mujoco_envs.gaps_to_cpu, with MJX's solver on both sides): the adapter's physics check
    (tests/frameworks/test_mjx.py)."""
    import jax
    import numpy as np

    def start(model, frameskip, rng):
        _, reset, advance, _, observe = physics(jax, model, frameskip, env_id)
        d, step, look = jax.jit(reset)(jax.random.PRNGKey(seed)), jax.jit(advance), jax.jit(observe)
        state = {"d": d}

        def advance_one(action):
            state["d"] = step(state["d"], action)
            return state["d"].qpos, state["d"].qvel, look(state["d"])
        return np.asarray(d.qpos, np.float64), np.asarray(d.qvel, np.float64), advance_one
    return gaps_to_cpu(env_id, steps, seed, cone, start, solver, GPU_SOLVERS)
