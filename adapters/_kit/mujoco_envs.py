"""The gymnasium MuJoCo envs that the physics adapters (mujoco-rollout on the CPU, mjx on JAX, mujoco-warp on Warp)
step without gymnasium: each one's observation, termination, time limit and reset, as gymnasium's v4 defaults set
them, and its own MjModel and frame skip read from gymnasium (so every backend steps the same model file); the
physics check against CPU MuJoCo they share, the solver a backend steps in place of one it lacks, and what their
rows record of a model's solver."""
from rlbench.api import Unsupported, env_info, make_env

# Per env, as gymnasium's v4 file sets it: how many leading qpos entries the observation leaves out, and the
# bound it clips qvel to (Hopper's and Walker2d's +-10; None: unclipped); when the env is healthy (None: it never
# terminates): each range over a qpos entry (index, lo, hi), "z" the torso's height and "angle" its pitch,
# "state" a range over the state vector (qpos, qvel) past its first two entries, "finite" that state all finite,
# and "closed" whether a range keeps its ends (Ant's, InvertedPendulum's) or not (Humanoid's, Hopper's, Walker2d's);
# reset_noise_scale and how qvel's noise is drawn; and the MjData fields the observation adds after qpos and qvel,
# whole (the world body's rows included), as mj_step (and then mj_rnePostConstraint, for cfrc_ext) leave them:
# computed at the last physics step's start.
ENVS = {"Ant-v4": {"obs_skip_qpos": 2, "healthy": {"z": (2, 0.2, 1.0), "finite": True, "closed": True},
                   "reset_noise": 0.1, "qvel_noise": "normal", "obs_fields": ()},
        "HalfCheetah-v4": {"obs_skip_qpos": 1, "healthy": None, "reset_noise": 0.1, "qvel_noise": "normal",
                           "obs_fields": ()},
        "Hopper-v4": {"obs_skip_qpos": 1, "qvel_clip": 10.0,
                      "healthy": {"z": (1, 0.7, float("inf")), "angle": (2, -0.2, 0.2), "state": (-100.0, 100.0)},
                      "reset_noise": 5e-3, "qvel_noise": "uniform", "obs_fields": ()},
        "Humanoid-v4": {"obs_skip_qpos": 2, "healthy": {"z": (2, 1.0, 2.0)}, "reset_noise": 0.01,
                        "qvel_noise": "uniform", "obs_fields": ("cinert", "cvel", "qfrc_actuator", "cfrc_ext")},
        "InvertedPendulum-v4": {"obs_skip_qpos": 0, "healthy": {"angle": (1, -0.2, 0.2), "finite": True,
                                                                "closed": True},
                                "reset_noise": 0.01, "qvel_noise": "uniform", "obs_fields": ()},
        "Swimmer-v4": {"obs_skip_qpos": 2, "healthy": None, "reset_noise": 0.1, "qvel_noise": "uniform",
                       "obs_fields": ()},
        "Walker2d-v4": {"obs_skip_qpos": 1, "qvel_clip": 10.0,
                        "healthy": {"z": (1, 0.8, 2.0), "angle": (2, -1.0, 1.0)},
                        "reset_noise": 5e-3, "qvel_noise": "uniform", "obs_fields": ()}}
TIME_LIMIT_STEPS = 1000       # gymnasium's TimeLimit for all (env.spec.max_episode_steps, checked below)
SOLVERS = ("model", "newton", "cg", "pgs")
GPU_SOLVERS = ("model", "newton", "cg")   # MJX and MuJoCo Warp have no PGS (Humanoid-v4's solver)


def gymnasium_model(workload):
    """(MjModel, frame skip, observation space, action space) of gymnasium's env, refused with the reason when
    gymnasium's env is not the one the adapters copy."""
    env = make_env(workload.env_id, **workload.env_kwargs)
    try:
        raw = env.unwrapped
        noise = getattr(raw, "_reset_noise_scale", ENVS[workload.env_id]["reset_noise"])  # InvertedPendulum's: fixed
        if (raw.frame_skip != env_info(workload.env_id).frameskip or env.spec.max_episode_steps != TIME_LIMIT_STEPS
                or noise != ENVS[workload.env_id]["reset_noise"]):
            raise RuntimeError(f"gymnasium's {workload.env_id} is not the one this adapter copies (frame_skip "
                               f"{raw.frame_skip}, time limit {env.spec.max_episode_steps}, reset noise {noise})")
        return raw.model, raw.frame_skip, env.observation_space, env.action_space
    finally:
        env.close()


def reset_noise(rng, nq: int, nv: int, env_id: str):
    """gymnasium's reset_model draws, in its order, from one env's generator: (qpos offset, qvel), to add to
    the state mj_resetData leaves (qpos0, zero velocity)."""
    scale = ENVS[env_id]["reset_noise"]
    dqpos = rng.uniform(-scale, scale, size=nq)
    if ENVS[env_id]["qvel_noise"] == "uniform":
        return dqpos, rng.uniform(-scale, scale, size=nv)
    return dqpos, scale * rng.standard_normal(nv)


def episode_ends(np, env_id: str, steps_done, qpos, qvel):
    """Which envs end at this step (any leading batch shape; `np` numpy or jax.numpy): the time limit
    (steps_done counts this step), or the env's unhealthy state (ENVS' "healthy")."""
    done = steps_done >= TIME_LIMIT_STEPS
    healthy = ENVS[env_id]["healthy"]
    if healthy is None:
        return done
    closed = healthy.get("closed", False)

    def within(x, lo, hi):
        return (x >= lo) & (x <= hi) if closed else (x > lo) & (x < hi)
    ok = None
    for key in ("z", "angle"):
        if key in healthy:
            i, lo, hi = healthy[key]
            ok = within(qpos[..., i], lo, hi) if ok is None else ok & within(qpos[..., i], lo, hi)
    if "state" in healthy or healthy.get("finite"):
        state = np.concatenate([qpos, qvel], axis=-1)
        if "state" in healthy:
            ok = ok & within(state[..., 2:], *healthy["state"]).all(axis=-1)
        if healthy.get("finite"):
            ok = ok & np.isfinite(state).all(axis=-1)
    return done | ~ok


def field_sizes(model, env_id: str) -> dict:
    """The observation's MjData fields and each one's length per env."""
    per = {"cinert": model.nbody * 10, "cvel": model.nbody * 6, "qfrc_actuator": model.nv,
           "cfrc_ext": model.nbody * 6}
    return {name: per[name] for name in ENVS[env_id]["obs_fields"]}


def obs_size(model, env_id: str) -> int:
    return model.nq - ENVS[env_id]["obs_skip_qpos"] + model.nv + sum(field_sizes(model, env_id).values())


def observation(np, env_id: str, qpos, qvel, fields: dict):
    """gymnasium's observation of a batch (leading axis: envs): qpos without its leading entries, qvel, then the
    env's fields (each (batch, ...) as the backend holds it), flattened per env."""
    clip = ENVS[env_id].get("qvel_clip")
    parts = [qpos[:, ENVS[env_id]["obs_skip_qpos"]:], np.clip(qvel, -clip, clip) if clip else qvel]
    parts += [fields[name].reshape(len(qpos), -1) for name in ENVS[env_id]["obs_fields"]]
    return np.concatenate(parts, axis=1)


def set_solver(model, solver: str, who: str, choices=SOLVERS) -> dict:
    """Puts the constraint solver a backend steps into the model: `model` keeps the model's own, or Newton
    (MuJoCo's default) where the backend has none of it (MJX and MuJoCo Warp lack Humanoid-v4's PGS); else the
    one named. Returns what the row adds to the physics record: the model's own solver where it was replaced."""
    import mujoco
    own = mujoco.mjtSolver(model.opt.solver).name.removeprefix("mjSOL_").lower()
    want = own if solver == "model" else solver
    if want not in choices:
        if solver != "model":
            raise Unsupported(f"{who} has no solver {solver} (valid: {', '.join(choices)})")
        want = "newton"
    model.opt.solver = getattr(mujoco.mjtSolver, f"mjSOL_{want.upper()}")
    return {} if want == own else {"model_solver": own.upper()}


def gaps_to_cpu(env_id: str, steps: int, seed: int, cone: str, start, solver: str = "model", choices=SOLVERS):
    """A physics backend's check against CPU MuJoCo (mj_step, float64, as gymnasium steps it): from the state
    `start(model, frameskip, rng)` gives, as (qpos, qvel, advance), and one sequence of random actions, `steps` env
    steps of `advance(action) -> (qpos, qvel, observation)` and of CPU MuJoCo. Per env step: the largest
    difference of qpos, of qvel and of gymnasium's observation, each divided by the largest magnitude of it in
    CPU MuJoCo, and whether CPU MuJoCo had a contact so far. cone "elliptic" switches the model's friction cones
    from its own (MuJoCo's default, pyramidal) to elliptic, on both sides; the solver is the backend's
    (`set_solver` with its choices), on both sides too."""
    import mujoco
    import numpy as np

    from rlbench.api import PolicySpec, Workload
    model, frameskip, _, action_space = gymnasium_model(Workload(env_id, 1, PolicySpec(), seed=seed))
    if cone == "elliptic":
        model.opt.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    set_solver(model, solver, "the backend", choices)
    rng = np.random.default_rng(seed)
    qpos, qvel, advance = start(model, frameskip, rng)
    cpu = mujoco.MjData(model)
    cpu.qpos[:], cpu.qvel[:] = qpos, qvel
    out, touched = [], False
    for a in rng.uniform(action_space.low, action_space.high, (steps, model.nu)):
        state = dict(zip(("qpos", "qvel", "obs"), (np.asarray(x, np.float64) for x in advance(a.astype(np.float32)))))
        cpu.ctrl[:] = a
        for _ in range(frameskip):
            mujoco.mj_step(model, cpu)
            touched = touched or cpu.ncon > 0
        mujoco.mj_rnePostConstraint(model, cpu)
        want = {"qpos": cpu.qpos, "qvel": cpu.qvel,
                "obs": observation(np, env_id, cpu.qpos[None], cpu.qvel[None],
                                   {k: getattr(cpu, k)[None] for k in ENVS[env_id]["obs_fields"]})[0]}
        out.append({name: float(np.abs(state[name] - want[name]).max() / max(np.abs(want[name]).max(), 1e-9))
                    for name in want})
        out[-1]["contact"] = touched
    return out


def solver_settings(model) -> dict:
    """What a physics row records of a model's options: timestep, solver and its iterations."""
    import mujoco
    return {"timestep": float(model.opt.timestep), "solver": mujoco.mjtSolver(model.opt.solver).name,
            "iterations": int(model.opt.iterations), "ls_iterations": int(model.opt.ls_iterations)}
