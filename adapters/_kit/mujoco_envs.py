"""The gymnasium MuJoCo envs that the physics adapters (mujoco-rollout on the CPU, mjx on JAX, mujoco-warp on Warp)
step without gymnasium: each one's observation, termination, time limit and reset, as gymnasium's v4 defaults set
them, and its own MjModel and frame skip read from gymnasium (so every backend steps the same model file); the
physics check against CPU MuJoCo they share, and what their rows record of a model's solver."""
from rlbench.api import env_info, make_env

# how many leading qpos entries gymnasium's observation leaves out, and the torso height range outside which the
# env terminates (None: it never terminates)
ENVS = {"Ant-v4": {"obs_skip_qpos": 2, "healthy_z": (0.2, 1.0)},
        "HalfCheetah-v4": {"obs_skip_qpos": 1, "healthy_z": None}}
TIME_LIMIT_STEPS = 1000       # gymnasium's TimeLimit for both (env.spec.max_episode_steps, checked below)
RESET_NOISE = 0.1             # gymnasium's reset_noise_scale for both (checked below)


def gymnasium_model(workload):
    """(MjModel, frame skip, observation space, action space) of gymnasium's env, refused with the reason when
    gymnasium's env is not the one the adapters copy."""
    env = make_env(workload.env_id, **workload.env_kwargs)
    try:
        raw = env.unwrapped
        if (raw.frame_skip != env_info(workload.env_id).frameskip or env.spec.max_episode_steps != TIME_LIMIT_STEPS
                or raw._reset_noise_scale != RESET_NOISE):
            raise RuntimeError(f"gymnasium's {workload.env_id} is not the one this adapter copies (frame_skip "
                               f"{raw.frame_skip}, time limit {env.spec.max_episode_steps}, reset noise "
                               f"{raw._reset_noise_scale})")
        return raw.model, raw.frame_skip, env.observation_space, env.action_space
    finally:
        env.close()


def reset_noise(rng, nq: int, nv: int):
    """gymnasium's reset_model draws, in its order, from one env's generator: (qpos offset, qvel), to add to
    the state mj_resetData leaves (qpos0, zero velocity)."""
    return rng.uniform(-RESET_NOISE, RESET_NOISE, size=nq), RESET_NOISE * rng.standard_normal(nv)


def episode_ends(np, env_id: str, steps_done, qpos, qvel):
    """Which envs end at this step (any leading batch shape): the time limit (steps_done counts this step),
    a non-finite state, or a torso height outside the env's healthy range."""
    done = steps_done >= TIME_LIMIT_STEPS
    healthy = ENVS[env_id]["healthy_z"]
    if healthy is not None:
        z = qpos[..., 2]
        done = done | ~np.isfinite(qpos).all(axis=-1) | ~np.isfinite(qvel).all(axis=-1) | (z < healthy[0]) \
            | (z > healthy[1])
    return done


def gaps_to_cpu(env_id: str, steps: int, seed: int, cone: str, start):
    """A physics backend's check against CPU MuJoCo (mj_step, float64, as gymnasium steps it): from the state
    `start(model, frameskip, rng)` gives, as (qpos, qvel, advance), and one sequence of random actions, `steps` env
    steps of `advance(action) -> (qpos, qvel)` and of CPU MuJoCo. Per env step: the largest difference of qpos
    and of qvel, divided by the largest magnitude of each in CPU MuJoCo's state, and whether CPU MuJoCo had a
    contact so far. cone "elliptic" switches the model's friction cones from its own (MuJoCo's default,
    pyramidal) to elliptic, on both sides."""
    import mujoco
    import numpy as np

    from rlbench.api import PolicySpec, Workload
    model, frameskip, _, action_space = gymnasium_model(Workload(env_id, 1, PolicySpec(), seed=seed))
    if cone == "elliptic":
        model.opt.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    rng = np.random.default_rng(seed)
    qpos, qvel, advance = start(model, frameskip, rng)
    cpu = mujoco.MjData(model)
    cpu.qpos[:], cpu.qvel[:] = qpos, qvel
    out, touched = [], False
    for a in rng.uniform(action_space.low, action_space.high, (steps, model.nu)):
        state = dict(zip(("qpos", "qvel"), (np.asarray(x, np.float64) for x in advance(a.astype(np.float32)))))
        cpu.ctrl[:] = a
        for _ in range(frameskip):
            mujoco.mj_step(model, cpu)
            touched = touched or cpu.ncon > 0
        out.append({name: float(np.abs(state[name] - getattr(cpu, name)).max()
                                / max(np.abs(getattr(cpu, name)).max(), 1e-9)) for name in ("qpos", "qvel")})
        out[-1]["contact"] = touched
    return out


def solver_settings(model) -> dict:
    """What a physics row records of a model's options: timestep, solver and its iterations."""
    import mujoco
    return {"timestep": float(model.opt.timestep), "solver": mujoco.mjtSolver(model.opt.solver).name,
            "iterations": int(model.opt.iterations), "ls_iterations": int(model.opt.ls_iterations)}
