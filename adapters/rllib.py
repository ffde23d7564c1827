"""RLlib itself (ray[rllib] 2.60.0, new API stack): `rllib-envrunner` samples with RLlib's own
SingleAgentEnvRunners as Ray actors, beside `ray-actors`; `rllib-ppo` trains with RLlib's PPO, beside cleanrl-ppo
and sb3-ppo. Both run in their own environment (adapters/envs/rllib.txt: RLlib requires gymnasium 1.2.2); Ray,
RLlib and torch are imported inside the sessions. How each is built: docs/strategies/stepping.md,
"How the RLlib adapters are built".
"""
import math
import os
import shutil
import tempfile
from collections import deque
from time import perf_counter

from adapters._kit import ray_runtime
from adapters._kit.learner_stats import TargetRun
from adapters._kit.ppo import (
    CLIP_COEF,
    ENT_COEF,
    HISTORY,
    ITERATION_OPTIONS,
    LEARNER_OPTIONS,
    MAX_GRAD_NORM,
    VF_COEF,
    default_target,
)
from rlbench.api import Adapter, Option, Unsupported, env_info, make_env, register, unsupported_spaces

ENV_NAME = "rlbench-env"                      # the env creator's name in Ray's registry
FAMILIES = ("classic", "synthetic", "gymnasium", "custom")   # no Atari or MuJoCo packages in the rllib env
VECTORIZE = ("sync", "async")                 # RLlib's gym_env_vectorize_mode: gymnasium's Sync/AsyncVectorEnv
RETURNS = "rlbench_episode_returns"           # the runners' metric: every finished episode's return

COMMON_OPTIONS = (
    Option("vectorize_mode", str, "sync", "how each runner vectorizes its envs (RLlib's gym_env_vectorize_mode): "
                                          "sync = SyncVectorEnv, async = AsyncVectorEnv (a subprocess per env)",
           VECTORIZE),
    Option("runner_cpus", float, 1.0, "CPUs each remote env runner reserves (num_cpus_per_env_runner)", low=0,
           open_low=True),
)


def rlbench_env(env_config):
    """RLlib's env creator: rlbench's env, as every adapter builds it (registered with register_env; RLlib
    calls it with an EnvContext holding env_config)."""
    return make_env(env_config["env_id"], **env_config["env_kwargs"])


def log_episode_return(*, episode, metrics_logger, prev_episode_chunks=(), **_):
    """RLlib's on_episode_end callback, in each runner: the finished episode's whole return (the chunks earlier
    sample() calls returned included) as one item of a series; train() hands the items back."""
    ret = episode.get_return() + sum(chunk.get_return() for chunk in prev_episode_chunks)
    metrics_logger.log_value(RETURNS, float(ret), reduce="item_series")


def _items(value) -> list:
    """An item_series metric as train() returns it: absent or [] (none), one item unwrapped, or a list."""
    if value is None:
        return []
    return list(value) if hasattr(value, "__len__") else [value]


def _where(runner) -> dict:
    import socket

    import ray
    node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    return {"runner": runner.worker_index, "node_id": node, "hostname": socket.gethostname(), "pid": os.getpid()}


def _supports(name, workload, num_envs_divisor, policies):
    family = env_info(workload.env_id).family
    if family not in FAMILIES:
        return (f"{name} runs in its own environment (gymnasium 1.2.2, no Atari or MuJoCo packages): classic "
                f"control, rlbench/Synthetic-v0 and user envs, not {workload.env_id} ({family})")
    if workload.policy.name not in policies:
        return f"{name} acts with RLlib's RLModule: policy {' or '.join(policies)} (got {workload.policy.label})"
    if num_envs_divisor and workload.num_envs % num_envs_divisor:
        return f"num_envs={workload.num_envs} must be a multiple of num_env_runners={num_envs_divisor}"
    return unsupported_spaces(workload, name, obs=("Box",), act=("Box", "Discrete"))


def _cuda(workload) -> bool:
    """Whether the policy asks for CUDA; Unsupported where torch sees no CUDA device."""
    if not workload.policy.device.startswith("cuda"):
        return False
    import torch
    if not torch.cuda.is_available():
        raise Unsupported("no CUDA device")
    return True


class _RayForCell:
    """Ray for one cell (ray_runtime: a local instance, or the cluster RAY_ADDRESS names), RLlib's env creator
    registered; close() leaves nothing: processes (ray_runtime), the local session's directory under Ray's temp
    dir, the Algorithm's log directory."""

    def __init__(self, num_cpus):
        self.init_s, self._shutdown = ray_runtime.start(num_cpus=num_cpus)
        import ray
        from ray.tune.registry import register_env
        self.ray = ray
        self.cluster = ray_runtime.cluster_info(ray)
        node = getattr(ray._private.worker, "_global_node", None)   # the session directory Ray made for us
        self.session_dir = node.get_session_dir_path() if node is not None and not os.environ.get("RAY_ADDRESS") \
            else None
        register_env(ENV_NAME, rlbench_env)
        self.logroot = None

    def algorithm_logs_in_temp(self):
        """An Algorithm is a Tune Trainable: it makes a log directory under ~/ray_results; here instead."""
        import ray.tune.trainable.trainable as trainable
        self.logroot = tempfile.mkdtemp(prefix="rlbench-rllib-")
        trainable.DEFAULT_STORAGE_PATH = self.logroot

    def close(self):
        try:
            self._shutdown()
        finally:
            if self.session_dir:
                shutil.rmtree(self.session_dir, ignore_errors=True)
            if self.logroot:
                shutil.rmtree(self.logroot, ignore_errors=True)


def _config(workload, options, runners, per_runner, fragment, hidden):
    """The PPOConfig both adapters start from: rlbench's env, the runners, the RLModule, no fault tolerance."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    return (PPOConfig()
            .environment(ENV_NAME, env_config={"env_id": workload.env_id, "env_kwargs": dict(workload.env_kwargs)})
            .framework("torch")
            .env_runners(num_env_runners=runners, num_envs_per_env_runner=per_runner,
                         rollout_fragment_length=fragment, num_cpus_per_env_runner=options["runner_cpus"],
                         gym_env_vectorize_mode=options["vectorize_mode"])
            .fault_tolerance(restart_failed_env_runners=False, ignore_env_runner_failures=False)
            .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=list(hidden), fcnet_activation="tanh",
                                                       vf_share_layers=False))
            .debugging(seed=workload.seed))


def _cpus(*reserved) -> int:
    return max(len(os.sched_getaffinity(0)), math.ceil(sum(reserved)))


class _RLlibSession:
    """What both sessions share: _open under a guard that closes what it had started, and close: the RLlib
    object they hold (`held`: an EnvRunnerGroup or an Algorithm, both stopped with stop()), then Ray."""
    held = ""

    def __init__(self, workload, options):
        setattr(self, self.held, None)
        self.runtime = None
        try:
            self._open(workload, options)
        except BaseException:
            self.close()
            raise

    def close(self):
        try:
            if getattr(self, self.held) is not None:
                getattr(self, self.held).stop()
                setattr(self, self.held, None)
        finally:
            if self.runtime is not None:
                self.runtime.close()
                self.runtime = None


# -- rllib-envrunner: RLlib's SingleAgentEnvRunners as Ray actors -------------------------------------------

class EnvRunnerSession(_RLlibSession):
    held = "group"

    def _open(self, workload, o):
        n = o["num_env_runners"]
        per = workload.num_envs // max(n, 1)
        cuda = _cuda(workload)
        if cuda and n == 0:
            raise Unsupported("RLlib's local env runner infers on the CPU: device=cuda needs num_env_runners >= 1")
        self.runtime = _RayForCell(_cpus(n * o["runner_cpus"]))
        from ray.rllib.env.env_runner_group import EnvRunnerGroup
        config = (_config(workload, o, n, per, o["rollout_fragment_length"], workload.policy.hidden)
                  .env_runners(batch_mode=o["batch_mode"], explore=o["explore"],
                               num_gpus_per_env_runner=1 / n if cuda else 0))
        self.group = EnvRunnerGroup(config=config, local_env_runner=n == 0)
        self.random = workload.policy.name == "random"
        placement = self.group.foreach_env_runner(_where, local_env_runner=n == 0)
        unit = per * (o["rollout_fragment_length"] if o["batch_mode"] == "truncate_episodes" else 0)
        self.info = {"workers": max(n, 1), "runtime_init_s": self.runtime.init_s, "cluster": self.runtime.cluster,
                     "placement": placement, **({"batch_size": unit * max(n, 1)} if unit else {})}

    def step(self) -> int:
        from ray.rllib.execution.rollout_ops import synchronous_parallel_sample
        rounds = synchronous_parallel_sample(worker_set=self.group, concat=False, random_actions=self.random,
                                             sample_timeout_s=None, _uses_new_env_runners=True)
        return sum(episode.env_steps() for episodes in rounds for episode in episodes)


@register
class RLlibEnvRunner(Adapter):
    name = "rllib-envrunner"
    description = ("RLlib's SingleAgentEnvRunners as Ray actors (EnvRunnerGroup, RLlib's connectors and "
                   "RLModule); one unit = one sample() round across runners")
    requires = ("ray", "torch")
    environment = "rllib"    # adapters/envs/rllib.txt: ray[rllib] 2.60.0, gymnasium 1.2.2
    unit_option = "rollout_fragment_length"
    options = (
        Option("num_env_runners", int, 2, "remote SingleAgentEnvRunner actors, each stepping num_envs / "
                                          "num_env_runners envs; 0 = one local EnvRunner in the cell process"),
        Option("batch_mode", str, "truncate_episodes", "RLlib's batch_mode: truncate_episodes = "
               "rollout_fragment_length steps of every env per sample(); complete_episodes = one whole episode "
               "per env, from a reset", ("truncate_episodes", "complete_episodes")),
        Option("rollout_fragment_length", int, 32, "truncate_episodes: env steps per env per sample()", low=1),
        Option("explore", bool, True, "policy mlp: forward_exploration (sample the action distribution) or "
                                      "forward_inference (greedy)"),
        *COMMON_OPTIONS,
    )

    def supports(self, workload, options):
        return _supports(self.name, workload, options["num_env_runners"], ("random", "mlp"))

    def tune_space(self, num_envs, cpus):
        return [{"num_env_runners": n} for n in sorted({0, 1, 2, cpus}) if n == 0 or num_envs % n == 0]

    def snippet(self, workload, options):
        n = options["num_env_runners"]
        return (f"config = PPOConfig().environment({workload.env_id!r}).env_runners(num_env_runners={n}, "
                f"num_envs_per_env_runner={workload.num_envs // max(n, 1)}, "
                f"rollout_fragment_length={options['rollout_fragment_length']}, "
                f"batch_mode={options['batch_mode']!r})\n"
                f"group = EnvRunnerGroup(config=config, local_env_runner={n == 0})\n"
                f"episodes = synchronous_parallel_sample(worker_set=group, _uses_new_env_runners=True, concat=False)")

    def open(self, workload, options):
        return EnvRunnerSession(workload, options)


# -- rllib-ppo: RLlib's PPO, Algorithm.train() -------------------------------------------------------------

class PPOSession(_RLlibSession, TargetRun):
    held = "algo"

    def _open(self, workload, o):
        n, learners = o["num_env_runners"], o["num_learners"]
        cuda = _cuda(workload)
        self.runtime = _RayForCell(_cpus(n * o["runner_cpus"], learners))
        batch = workload.num_envs * o["num_steps"]
        self.minibatch = batch // max(learners, 1) // o["num_minibatches"]
        lr = [[0, o["lr"]], [o["total_timesteps"], 0.0]] if o["anneal_lr"] else o["lr"]
        config = (_config(workload, o, n, workload.num_envs // max(n, 1), o["num_steps"], workload.policy.hidden)
                  .learners(num_learners=learners, num_gpus_per_learner=1 if cuda else 0)
                  .training(train_batch_size_per_learner=batch // max(learners, 1), minibatch_size=self.minibatch,
                            num_epochs=o["update_epochs"], lr=lr, gamma=o["gamma"], lambda_=o["gae_lambda"],
                            clip_param=CLIP_COEF["vector"], entropy_coeff=ENT_COEF, vf_loss_coeff=VF_COEF,
                            grad_clip=MAX_GRAD_NORM, grad_clip_by="global_norm", use_kl_loss=False)
                  .callbacks(on_episode_end=log_episode_return))
        self.runtime.algorithm_logs_in_temp()
        self.algo = config.build_algo()
        group = self.algo.env_runner_group
        placement = group.foreach_env_runner(_where, local_env_runner=n == 0)
        self.learners = max(learners, 1)
        self.sampled = self.trained = 0
        self.history = deque(maxlen=HISTORY)
        self.target = o["target_return"] or default_target(workload.env_id)
        self.t_start = self.time_to_target = self.steps_to_target = None
        self.metrics = self
        self.info = {"workers": max(n, 1), "batch_size": batch, "runtime_init_s": self.runtime.init_s,
                     "cluster": self.runtime.cluster, "placement": placement}
        self.reset()

    def step(self) -> int:
        if self.t_start is None:
            self.t_start = perf_counter()
        result = self.algo.train()
        sampled = int(result["env_runners"]["num_env_steps_sampled_lifetime"])
        made, self.sampled = sampled - self.sampled, sampled
        trained = result.get("learners", {}).get("default_policy", {}).get("num_module_steps_trained_lifetime")
        if trained is not None:
            self.trained = int(trained)
        self.history.extend(_items(result["env_runners"].get(RETURNS)))
        self.progress(self.return_mean(), self.sampled)
        return made

    def return_mean(self):
        """Mean return of the last 100 finished episodes; None before the first."""
        return sum(self.history) / len(self.history) if self.history else None

    def episode_returns(self) -> list:
        """The returns of the last (up to) 100 finished episodes, oldest first."""
        return list(self.history)

    def updates(self) -> int:
        """Adam steps: RLlib's minibatches are always full (its iterator cycles), each one optimizer step of
        every learner in lockstep (DDP), so rows trained / (minibatch size x learners)."""
        return self.trained // (self.minibatch * self.learners)

    # -- metrics over the timed window --
    def reset(self):
        self._mark = (self.sampled, self.updates())

    def read(self, seconds):
        if seconds <= 0:
            return {}
        steps0, updates0 = self._mark
        return {"updates_per_s": (self.updates() - updates0) / seconds,
                "samples_per_s": (self.sampled - steps0) / seconds,
                "return_mean": self.return_mean(), "return_first": self.return_first,
                "time_to_target_s": self.time_to_target, "steps_to_target": self.steps_to_target}


_BY_NAME = {o.name: o for o in LEARNER_OPTIONS}


@register
class RLlibPPO(Adapter):
    name = "rllib-ppo"
    kind = "learner"
    algo = "ppo"
    description = ("RLlib's PPO (Algorithm.train(): EnvRunners sample, its Learner updates) with CleanRL's "
                   "hyperparameters; one unit = one train() iteration")
    requires = ("ray", "torch")
    environment = "rllib"
    options = (
        Option("num_env_runners", int, 2, "remote env runners sampling for PPO (RLlib's default 2), each "
                                          "num_envs / num_env_runners envs; 0 = sampling in the cell process"),
        Option("num_learners", int, 0, "0 = one local Learner in the cell process; N = N Learner actors (DDP)"),
        *ITERATION_OPTIONS,
        _BY_NAME["total_timesteps"],
        _BY_NAME["target_return"],
        *COMMON_OPTIONS,
    )

    def supports(self, workload, options):
        reason = _supports(self.name, workload, options["num_env_runners"], ("mlp",))
        if reason:
            return reason
        learners = max(options["num_learners"], 1)
        batch = workload.num_envs * options["num_steps"]
        if batch % (learners * options["num_minibatches"]) or batch // learners // options["num_minibatches"] < 2:
            return (f"num_envs x num_steps = {batch} must be a multiple of num_minibatches="
                    f"{options['num_minibatches']} x learners={learners} (and minibatches of at least 2)")
        return None

    def open(self, workload, options):
        return PPOSession(workload, options)
