"""`sample-factory`: Sample Factory 2's own asynchronous sampler (rollout worker processes, double-buffered sampling,
one inference worker), measuring env throughput as EnvPool's benchmark ran Sample Factory (its third column).

Runs in its own environment (adapters/envs/sample-factory.txt); nothing from Sample Factory or torch is imported at
module level. How it is built: docs/strategies/stepping.md, "How the Sample Factory adapter is built".
"""
import shutil
import tempfile
import threading
import time

from adapters._kit.batch import spaces_reason
from rlbench.api import USER_FAMILIES, Adapter, Option, Unsupported, env_info, make_env, register

SUPPORTED_FAMILIES = ("atari", "classic", "synthetic", *USER_FAMILIES)
OBS_PARTS = ("Box", "MultiDiscrete", "MultiBinary")          # arrays: what its tensor dicts hold
OBS_SPACES, ACT_SPACES = (*OBS_PARTS, "Dict"), ("Discrete", "Box")


def _env_fn(env_id, env_kwargs, full_env_name, cfg, env_config=None, render_mode=None):
    """Sample Factory's env factory signature; pickled by reference into the spawned rollout workers."""
    return make_env(env_id, **env_kwargs)


def _zero_encoder(cfg, obs_space):
    """An encoder that ignores the observation: the policy's logits are its zero-initialized bias."""
    import torch
    from sample_factory.model.encoder import Encoder

    class ZeroEncoder(Encoder):
        def forward(self, obs_dict):
            obs = next(iter(obs_dict.values()))
            return torch.zeros(obs.shape[0], 1)

        def get_out_size(self) -> int:
            return 1

        def device_for_input_tensor(self, input_tensor_name):
            return torch.device("cpu")

        def type_for_input_tensor(self, input_tensor_name):
            return torch.uint8  # no float conversion of the frames: they are never read

    return ZeroEncoder(cfg)


def layout(num_envs: int, options: dict):
    """(workers, envs_per_worker) from num_envs and the options, or a reason they do not fit."""
    workers, per = options["workers"], options["envs_per_worker"]
    if workers and per:
        if workers * per != num_envs:
            return f"workers x envs_per_worker must equal num_envs ({workers} x {per} != {num_envs})"
    elif per:
        if num_envs % per:
            return f"envs_per_worker={per} must divide num_envs={num_envs}"
        workers = num_envs // per
    else:
        workers = workers or 1
        if num_envs % workers:
            return f"workers={workers} must divide num_envs={num_envs}"
        per = num_envs // workers
    if per % options["worker_num_splits"]:
        return (f"worker_num_splits={options['worker_num_splits']} must divide envs_per_worker={per} "
                f"(num_envs={num_envs}, workers={workers})")
    return workers, per


class SampleFactorySession:
    def __init__(self, workload, options, workers, per_worker):
        from rlbench.api import become_subreaper
        become_subreaper()  # anything a worker leaves behind is ours to reap on close
        from functools import partial
        from multiprocessing import resource_tracker

        from sample_factory.algo.sampling.simplified_sampling_api import SamplingLoop
        from sample_factory.algo.utils.context import global_model_factory, reset_global_context
        from sample_factory.algo.utils.env_info import extract_env_info
        from sample_factory.algo.utils.make_env import make_env_func_batched
        from sample_factory.cfg.arguments import parse_full_cfg, parse_sf_args
        from sample_factory.envs.env_utils import register_env
        self._own_tracker = resource_tracker._resource_tracker._fd is None  # started by SF's spawned workers
        self.train_dir = tempfile.mkdtemp(prefix="rlbench-sf-")
        reset_global_context()
        register_env("rlbench", partial(_env_fn, workload.env_id, dict(workload.env_kwargs)))
        global_model_factory().register_encoder_factory(_zero_encoder)
        argv = ["--env=rlbench", "--device=cpu", f"--train_dir={self.train_dir}", "--experiment=rlbench",
                f"--num_workers={workers}", f"--num_envs_per_worker={per_worker}",
                f"--worker_num_splits={options['worker_num_splits']}",
                f"--batched_sampling={options['batched_sampling']}", f"--rollout={options['rollout']}",
                f"--set_workers_cpu_affinity={options['cpu_affinity']}",
                "--policy_workers_per_policy=1", "--num_policies=1", "--serial_mode=False", "--async_rl=True",
                "--use_rnn=False", "--normalize_input=False", "--normalize_returns=False",
                "--decorrelate_envs_on_one_worker=False", "--use_env_info_cache=False",
                "--with_wandb=False", f"--seed={workload.seed}"]
        parser, _ = parse_sf_args(argv=argv)
        self.cfg = cfg = parse_full_cfg(parser, argv)
        probe = make_env_func_batched(cfg, env_config=None)
        try:
            sf_env_info = extract_env_info(probe, cfg)
        finally:
            probe.close()

        self._lock = threading.Condition()
        self._sampled = 0
        self._failed = None
        self.loop = SamplingLoop(cfg, sf_env_info)
        self.loop.init()
        self.loop.set_new_trajectory_callback(self._on_trajectory)
        self.thread = threading.Thread(target=self._run, name="sf-sampling-loop", daemon=True)
        self.thread.start()
        self.unit = workload.num_envs * options["rollout"]
        self.processes = workers + 1  # rollout workers and one inference worker, all spawned
        self.info = {"workers": workers, "batch_size": per_worker // options["worker_num_splits"]}
        try:
            self.loop.wait_until_ready()
            self.loop.start()  # model_initialized(None): the inference worker builds the zero-encoder policy
            self.step()  # first rollouts arrive only after every process started: not part of the first unit
        except BaseException:
            self.close()
            raise

    def _run(self):
        status = self.loop.run()
        with self._lock:
            if not self.loop.stopped:
                self._failed = f"Sample Factory's sampling loop ended on its own (status {status})"
            self._lock.notify_all()

    def _on_trajectory(self, traj, buffer_indices, device):
        from sample_factory.algo.utils.rl_utils import samples_per_trajectory
        n = samples_per_trajectory(traj)
        self.loop.yield_trajectory_buffers(buffer_indices, device)  # released at once, not copied
        with self._lock:
            self._sampled += n
            self._lock.notify_all()

    def step(self) -> int:
        import multiprocessing
        with self._lock:
            start, deadline = self._sampled, time.monotonic() + 60.0
            while self._sampled - start < self.unit:
                if self._failed:
                    raise RuntimeError(self._failed)
                if not self._lock.wait(timeout=1.0):
                    alive = len(multiprocessing.active_children())
                    if alive < self.processes:
                        raise RuntimeError(f"a Sample Factory process exited ({alive} of {self.processes} "
                                           f"alive; its error is on stderr)")
                    if time.monotonic() > deadline:
                        raise RuntimeError("Sample Factory sampled nothing for 60 s")
            return self._sampled - start

    def close(self):
        import multiprocessing
        try:
            if self.thread.is_alive():
                self.loop.stop_sampling()
                self.thread.join(timeout=30.0)
        finally:
            deadline = time.monotonic() + 20.0
            while multiprocessing.active_children() and time.monotonic() < deadline:
                time.sleep(0.05)  # workers exit on the stop signal; active_children() reaps them
            for proc in multiprocessing.active_children():
                proc.kill()
                proc.join(timeout=5.0)
            shutil.rmtree(self.train_dir, ignore_errors=True)
            self._release()

    def _release(self):
        """Unlink the named semaphores SF made (its parameter-server locks: their finalizers run now, not at
        exit) and stop the resource-tracker process its spawned workers started, so nothing of Sample
        Factory outlives close()."""
        import multiprocessing
        from multiprocessing import resource_tracker, synchronize, util
        names = {ps.policy_lock._semlock.name for ps in (self.loop.param_servers or {}).values()
                 if isinstance(ps.policy_lock, synchronize.SemLock)}
        for finalizer in list(util._finalizer_registry.values()):
            if getattr(finalizer, "_callback", None) is synchronize.SemLock._cleanup and finalizer._args[0] in names:
                try:
                    finalizer()
                except OSError:  # already gone (another cell's runner sweeping /dev/shm of the machine)
                    pass
        if self._own_tracker and not multiprocessing.active_children():
            resource_tracker._resource_tracker._stop()


@register
class SampleFactory(Adapter):
    name = "sample-factory"
    description = "Sample Factory 2's asynchronous sampler: rollout worker processes, double-buffered envs"
    requires = ("sample_factory",)
    environment = "sample-factory"   # adapters/envs/sample-factory.txt: its own pinned environment
    unit_option = "rollout"
    options = (
        Option("workers", int, 0, "rollout worker processes; 0 = num_envs // envs_per_worker (1 if both are 0)"),
        Option("envs_per_worker", int, 0, "envs per rollout worker; 0 = num_envs // workers"),
        Option("worker_num_splits", int, 2, "env groups per worker: 2 = double-buffered sampling", (1, 2)),
        Option("batched_sampling", bool, False, "a worker steps its split as one batch (SF's batched mode)"),
        Option("rollout", int, 32, "env steps per trajectory; one unit = one rollout of every env", low=1),
        Option("cpu_affinity", bool, True, "Sample Factory pins each worker to cores (set_workers_cpu_affinity)"),
    )

    def supports(self, workload, options):
        family = env_info(workload.env_id).family
        if family not in SUPPORTED_FAMILIES:
            return (f"sample-factory runs Atari (<Game>-v5, e.g. Pong-v5), rlbench/Synthetic-v0, CartPole-v1 and "
                    f"the user's gymnasium envs, not {workload.env_id}")
        if workload.policy.name != "random":
            return f"sample-factory samples random actions only (policy {workload.policy.label})"
        fit = layout(workload.num_envs, options)
        if isinstance(fit, str):
            return fit
        return spaces_reason(workload, self.name, obs=OBS_SPACES, parts=OBS_PARTS, act=ACT_SPACES)

    def open(self, workload, options):
        fit = layout(workload.num_envs, options)
        if isinstance(fit, str):
            raise Unsupported(fit)
        return SampleFactorySession(workload, options, *fit)
