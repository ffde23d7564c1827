"""What the PPO learners share, so that they train alike and are compared on the same terms: CleanRL's
hyperparameters (ppo.py / ppo_atari.py; purejaxrl-ppo and sb3-ppo use the same), the options of a PPO
iteration, the solved criterion, and the checks of cleanrl-ppo and sb3-ppo (PPO on a vector env).
"""
import importlib.util
import math

from rlbench.api import Option, env_info

ACT = ("Discrete",)  # a categorical policy (the observations each learner carries: learner_nets.obs_reason)

GAMMA, GAE_LAMBDA, ENT_COEF, VF_COEF, MAX_GRAD_NORM = 0.99, 0.95, 0.01, 0.5, 0.5
ENT_COEF_GAUSSIAN = 0.0                        # ppo_continuous_action.py's ent_coef
NORM_CLIP = 10.0                               # ppo_continuous_action.py clips normalized obs and rewards to +-10
CLIP_COEF = {"image": 0.1, "vector": 0.2}     # ppo_atari.py / ppo.py
HISTORY = 100                                  # return_mean: the last 100 finished episodes
TARGETS = {"CartPole-v1": 475.0}               # solved (gymnasium's CartPole-v1 criterion)
VECS = ("dummy", "subproc", "envpool")
# the env-stepping adapter that steps each learner's vector env (rlbench.contract.Adapter.collector): EnvPool's
# batch is every env, as the learners' (sync)
COLLECTORS = {
    "cleanrl-ppo": {"dummy": ("gymnasium-sync", {}), "subproc": ("gymnasium-async", {}),
                    "envpool": ("envpool-sync", {})},
    "sb3-ppo": {"dummy": ("sb3-dummy", {}), "subproc": ("sb3-subproc", {}), "envpool": ("envpool-sync", {})},
}

ITERATION_OPTIONS = (
    Option("num_steps", int, 128, "rollout length per env per iteration", low=1),
    Option("update_epochs", int, 4, "passes over each rollout", low=1),
    Option("num_minibatches", int, 4, "minibatches per epoch", low=1),
    Option("lr", float, 2.5e-4, "Adam learning rate", low=0, open_low=True),
    Option("anneal_lr", bool, True, "anneal the learning rate linearly to 0 over total_timesteps"),
    Option("gamma", float, GAMMA, "discount of returns and advantages, and of the return a Gaussian's rewards "
                                  "are scaled by (rl-zoo tunes Pendulum-v1 at 0.9)",
           low=0, high=1),
    Option("gae_lambda", float, GAE_LAMBDA, "GAE's lambda", low=0, high=1),
)

LEARNER_OPTIONS = (  # cleanrl-ppo and sb3-ppo
    Option("vec", str, "dummy", "vector env underneath: dummy (one process: gymnasium SyncVectorEnv, SB3 "
                                "DummyVecEnv), subproc (a subprocess per env: AsyncVectorEnv, SubprocVecEnv), "
                                "envpool (EnvPool, batch_size = num_envs)", VECS),
    Option("num_threads", int, 0, "vec=envpool: pool threads; 0 = EnvPool's default, min(num_envs, hardware threads)"),
    *ITERATION_OPTIONS,
    Option("total_timesteps", int, 500_000, "env steps of the whole training run the annealing spans", low=1),
    Option("target_return", float, 0.0, "mean return of the last 100 episodes counted as solved "
                                         "(time_to_target_s); 0 = the env's own (CartPole-v1: 475, else none)",
           low=-math.inf),
)


def vec_space(num_envs: int, cpus: int) -> list:
    """cleanrl-ppo's and sb3-ppo's tune_space: the vector env underneath (settings supports() refuses, EnvPool
    on an env it has not, are left out by the tuner); the recipe (rollout length, epochs, minibatches) stays."""
    return [{"vec": vec} for vec in VECS]


def default_target(env_id: str) -> float:
    """target_return=0 means the env's own: CartPole-v1 475; none elsewhere (Pong's 18+ takes hours on 2 cores)."""
    return TARGETS.get(env_id, math.inf)


def learner_supports(name: str, workload, options, nets: bool = False, act: tuple = ACT):
    """What cleanrl-ppo and sb3-ppo cannot host, told without importing a framework (EnvPool's registry
    aside, for vec=envpool on a plain gymnasium id). `nets`: it trains rlbench's networks (cleanrl-ppo: mlp,
    cnn, cnn:impala); else only `mlp`, as its hidden sizes (sb3-ppo builds its own). `act`: the action spaces
    its policy samples (Box: a Gaussian)."""
    from adapters._kit.learner_nets import obs_reason, policy_reason
    from adapters._kit.native import envpool_native
    if options["vec"] == "envpool" and importlib.util.find_spec("envpool") is None:
        return "package not installed: envpool"
    if nets and policy_reason(name, workload, "its policy"):
        return policy_reason(name, workload, "its policy")
    if not nets and workload.policy.name != "mlp":
        return f"{name} trains its policy: needs policy mlp (got {workload.policy.name})"
    batch = workload.num_envs * options["num_steps"]
    if batch % options["num_minibatches"] or batch // options["num_minibatches"] < 2:
        return (f"num_envs x num_steps = {batch} must be a multiple of num_minibatches="
                f"{options['num_minibatches']} (and minibatches of at least 2)")
    info = env_info(workload.env_id)
    if info.family in ("mujoco", "dm_control") and "Box" not in act:
        return f"{name} samples a categorical: {workload.env_id} has continuous actions"
    if info.family == "dm_control" and options["vec"] != "envpool":
        return (f"{workload.env_id} is a DeepMind Control task, which EnvPool runs and gymnasium does not: "
                f"vec=envpool (got vec={options['vec']})")
    reason = obs_reason(name, workload, act)
    if reason is None and options["vec"] == "envpool":
        reason = envpool_native(workload, f"{name} vec=envpool")
    return reason
