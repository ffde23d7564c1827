"""The gymnasium MuJoCo envs that the physics adapters (mujoco-rollout on the CPU, mjx on JAX) step without
gymnasium: each one's observation, termination, time limit and reset, as gymnasium's v4 defaults set them, and
its own MjModel and frame skip read from gymnasium (so every backend steps the same model file)."""
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
