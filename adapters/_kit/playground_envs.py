"""MuJoCo Playground's DeepMind Control tasks under rlbench's env ids (EnvPool's names, family dm_control): which
ones, loading one with the physics implementation asked, and what a row records of its physics. Shared by the
playground adapter (stepping) and brax-ppo (Brax's PPO on them, as Playground trains them)."""
from adapters._kit.mujoco_envs import solver_settings
from rlbench.api import Option

IMPL = Option("impl", str, "default", "Playground's physics: its own choice for the env (default), jax (MJX) or "
                                      "warp (MuJoCo Warp through MJX's FFI)", ("default", "jax", "warp"))

# the env ids (rlbench.envs, family dm_control: EnvPool's names) -> Playground's registry names
TASKS = {env_id: env_id.removesuffix("-v1") for env_id in (
    "CheetahRun-v1", "HopperHop-v1", "HopperStand-v1", "HumanoidRun-v1", "HumanoidStand-v1", "HumanoidWalk-v1",
    "WalkerRun-v1", "WalkerStand-v1", "WalkerWalk-v1")}


def load_env(name: str, impl: str):
    """Playground's env and its config, impl as asked ("default": the env's own)."""
    from mujoco_playground import registry
    config = registry.get_default_config(name)
    if impl != "default":
        config.impl = impl
    return registry.load(name, config=config), config


def physics_settings(env, config) -> dict:
    """What the row records of the physics it stepped: the model's options as Playground set them."""
    import mujoco
    m = env.mj_model
    out = {**solver_settings(m), "frame_skip": int(env.n_substeps), "ctrl_dt": float(env.dt),
           "cone": mujoco.mjtCone(m.opt.cone).name,
           "eulerdamp": not m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_EULERDAMP,
           "precision": "float32", "impl": str(env.mjx_model.impl.value)}
    for key in ("naconmax", "njmax"):
        if key in config:
            out[key] = int(config[key])
    return out
