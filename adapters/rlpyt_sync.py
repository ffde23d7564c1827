"""`rlpyt-sync` (and `ddp`, the same under the learner kind): rlpyt's synchronous multi-process runner (SyncRl),
written natively. `ranks` processes each run a sampler + A2C learner on their own envs; torch
DistributedDataParallel all-reduces the gradients, so the parameters stay identical. One step() is one
iteration on every rank. How it is built: docs/strategies/learners.md, "How the rlpyt-sync runner is built".

A Dict or Tuple observation (a screen beside game variables) is kept in a rank's rollout buffer one array per part,
each in its own dtype (procs.obs_arrays: a uint8 screen stays uint8), and handed to the network as its one flat
float input (nets.net_input); a Box is one array, exactly as before.
"""
from dataclasses import replace
from datetime import timedelta
from time import monotonic, perf_counter_ns, sleep

import numpy as np

from adapters._kit.a2c import ACT, a2c_loss
from adapters._kit.batch import join, put
from adapters._kit.learner_nets import learner_reason, obs_reason
from adapters._kit.nets import actor_critic, map_obs, net_input, obs_scale, torso_of
from adapters._kit.procs import CONTEXT_OPTION, HelperProcesses, WorkerSession, obs_arrays, start_process
from rlbench.api import Adapter, Option, Unsupported, env_info, make_env, register

ITERATE, REPORT_PARAMS, STOP = 0, 1, 2
HOST = "127.0.0.1"
STAGES = ("env", "inference", "learn", "sync")


def _key(kind: str, rank: int) -> str:
    return f"rlpyt-sync/{kind}/{rank}"


def _device(spec_device: str, rank: int) -> str:
    """Rank r on GPU r (round-robin when GPUs are shared, which only gloo allows)."""
    if not spec_device.startswith("cuda"):
        return spec_device
    import torch
    return f"cuda:{rank % torch.cuda.device_count()}"


class _Rank:
    """One rank's sampler and algorithm: its envs, the model (DDP once connected), Adam, and the
    seeded generator that samples actions. Counts ns per stage for the session's metrics."""

    def __init__(self, rank: int, workload, options: dict, envs_per_rank: int):
        self.rank, self.batch_T, self.lr = rank, options["batch_T"], options["lr"]
        self.ns = dict.fromkeys(STAGES, 0)
        self.iterations = 0
        self.envs = []
        self.ddp = self.optimizer = None
        self.connected = False
        try:
            self._build(workload, envs_per_rank)
        except BaseException:
            self.close()
            raise

    def _build(self, workload, envs_per_rank: int):
        import gymnasium as gym
        import torch
        rank = self.rank
        first = rank * envs_per_rank  # global env index: seeds do not repeat across ranks
        for _ in range(envs_per_rank):
            self.envs.append(make_env(workload.env_id, **workload.env_kwargs))
        space = self.envs[0].action_space
        if not isinstance(space, gym.spaces.Discrete):
            raise Unsupported(f"rlpyt-sync's A2C samples a categorical: needs a Discrete action space "
                              f"(got {type(space).__name__})")
        self.action_start = int(space.start)
        obs_space = self.envs[0].observation_space
        resets = [env.reset(seed=workload.seed + first + i)[0] for i, env in enumerate(self.envs)]
        if getattr(obs_space, "spaces", None) is None:   # a Box (or another array): one array, as ever
            self.obs = np.stack(resets)
            self.scale = obs_scale(self.obs.dtype)
        else:   # a Dict or Tuple: an array per part in its own dtype; its images are scaled in the torso
            self.obs = obs_arrays(obs_space, (envs_per_rank,))
            for i, obs in enumerate(resets):
                put(self.obs, i, obs)
            self.scale = 1.0

        torch.set_num_threads(workload.policy.threads)
        self.device = torch.device(_device(workload.policy.device, rank))
        torch.manual_seed(workload.seed)  # identical initial parameters on every rank
        torso = torso_of(workload.policy, obs_space)
        self.model = actor_critic(torso, int(space.n)).to(self.device)
        self.gen = torch.Generator(self.device)
        self.gen.manual_seed(workload.seed * 1000 + rank)
        T, B = self.batch_T, envs_per_rank
        self.buf_obs = map_obs(lambda a: np.empty((T, *a.shape), dtype=a.dtype), self.obs)
        self.buf_actions = np.empty((T, B), dtype=np.int64)
        self.buf_rewards = np.empty((T, B), dtype=np.float32)
        self.buf_dones = np.empty((T, B), dtype=np.float32)

    def connect(self, store, world_size: int, backend: str, timeout_s: float):
        """Join the process group; DDP broadcasts rank 0's parameters to the others."""
        import torch
        import torch.distributed as dist
        dist.init_process_group(backend, store=store, rank=self.rank, world_size=world_size,
                                timeout=timedelta(seconds=timeout_s))
        self.connected = True
        ids = [self.device.index] if self.device.type == "cuda" else None
        self.ddp = torch.nn.parallel.DistributedDataParallel(self.model, device_ids=ids)
        self.optimizer = torch.optim.Adam(self.ddp.parameters(), lr=self.lr)
        # nccl broadcasts device tensors, gloo host ones
        cmd_device = self.device if backend == "nccl" else torch.device("cpu")
        self.cmd = torch.zeros(1, dtype=torch.int64, device=cmd_device)

    def command(self, value: int = -1) -> int:
        """Rank 0 sends `value`, the others receive it; the time is waiting for the slowest rank."""
        import torch.distributed as dist
        t0 = perf_counter_ns()
        if self.rank == 0:
            self.cmd.fill_(value)
        dist.broadcast(self.cmd, src=0)
        value = int(self.cmd.item())
        self.ns["sync"] += perf_counter_ns() - t0
        return value

    def _tensor(self, obs):
        """The network's flat float input from a batch (an array, or a dict or tuple of them)."""
        import torch

        def rows(a):
            return torch.as_tensor(a, device=self.device).reshape(len(a), -1).float()
        return net_input(obs, rows, self.scale)

    def iterate(self):
        """Sample batch_T steps from every env, then one A2C update through DDP."""
        import torch
        ns = self.ns
        for t in range(self.batch_T):
            t0 = perf_counter_ns()
            put(self.buf_obs, t, self.obs)
            with torch.no_grad():
                logits, _ = self.model(self._tensor(self.obs))
                actions = torch.multinomial(torch.softmax(logits, -1), 1, generator=self.gen).squeeze(1)
            actions = actions.cpu().numpy()
            t1 = perf_counter_ns()
            for i, env in enumerate(self.envs):
                obs, reward, terminated, truncated, _ = env.step(int(actions[i]) + self.action_start)
                done = terminated or truncated
                if done:
                    obs, _ = env.reset()
                put(self.obs, i, obs)
                self.buf_rewards[t, i] = reward
                self.buf_dones[t, i] = done
            self.buf_actions[t] = actions
            t2 = perf_counter_ns()
            ns["inference"] += t1 - t0
            ns["env"] += t2 - t1
        t0 = perf_counter_ns()
        self._learn()
        ns["learn"] += perf_counter_ns() - t0
        self.iterations += 1

    def _learn(self):
        import torch
        T, B = self.buf_actions.shape
        # one forward over the batch and the last observation, whose value bootstraps the returns
        x = self._tensor(join([map_obs(lambda a: a.reshape(T * B, *a.shape[2:]), self.buf_obs), self.obs]))
        logits, values = self.ddp(x)
        actions, rewards, dones = (torch.as_tensor(a, device=self.device)
                                   for a in (self.buf_actions, self.buf_rewards, self.buf_dones))
        loss = a2c_loss(torch, logits[:T * B].reshape(T, B, -1), values[:T * B].reshape(T, B),
                        values[T * B:].detach(), actions, rewards, dones)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # DDP all-reduces (averages) the gradients here
        self.optimizer.step()

    def gather_params(self):
        """Every rank's flat parameter vector, in rank order (all ranks take part)."""
        import torch
        import torch.distributed as dist
        flat = torch.cat([p.detach().reshape(-1) for p in self.model.parameters()])
        if self.cmd.device != flat.device:
            flat = flat.to(self.cmd.device)
        out = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
        dist.all_gather(out, flat)
        return [o.cpu().numpy().copy() for o in out]

    def close(self):
        for env in self.envs:
            env.close()
        self.envs = []
        if self.connected:
            import torch.distributed as dist
            self.connected = False
            self.ddp = self.optimizer = None
            dist.destroy_process_group()


def _worker_main(rank, world_size, port, workload, options, envs_per_rank, backend):
    """A worker rank: build, say ready, join the group, then follow rank 0's commands."""
    store = me = None
    try:
        import torch.distributed as dist
        store = dist.TCPStore(HOST, port, world_size, False, timeout=timedelta(seconds=options["timeout_s"]))
        me = _Rank(rank, workload, options, envs_per_rank)
        store.set(_key("ready", rank), "1")
        me.connect(store, world_size, backend, options["timeout_s"])
        while True:
            cmd = me.command()
            if cmd == ITERATE:
                me.iterate()
            elif cmd == REPORT_PARAMS:
                me.gather_params()
            else:
                break
    except BaseException as exc:
        if store is not None:
            try:
                store.set(_key("error", rank), f"{type(exc).__name__}: {exc}")
            except Exception:
                pass
        raise
    finally:
        if me is not None:
            me.close()


class SyncMetrics:
    """Rank 0's figures over the timed window: iterations (updates) and the transitions they consumed per
    second, where its time went, and the policy lag (0: every rank acts with the parameters it learns on)."""

    def __init__(self, rank: _Rank, samples_per_iteration: int, info: dict):
        self._rank, self._samples, self._info = rank, samples_per_iteration, info
        self.reset()

    def reset(self):
        self._ns0 = dict(self._rank.ns)
        self._it0 = self._rank.iterations

    def read(self, seconds: float) -> dict:
        if seconds <= 0:
            return {}
        iterations = self._rank.iterations - self._it0
        self._info["policy_lag_hist"] = [iterations]
        out = {"updates_per_s": iterations / seconds, "samples_per_s": iterations * self._samples / seconds,
               "policy_lag_mean": 0.0, "policy_lag_max": 0.0}
        for stage in STAGES:
            out[f"{stage}_frac"] = (self._rank.ns[stage] - self._ns0[stage]) / 1e9 / seconds
        return out


class SyncSession(WorkerSession):
    def __init__(self, workload, options: dict):
        self.procs, self.rank0, self.store, self.helpers = [], None, None, None
        self.failed = None  # why the ranks can no longer work together
        self._closed = False
        self.ranks = options["ranks"]
        self.envs_per_rank = workload.num_envs // self.ranks
        try:
            self._open(workload, options)
        except BaseException:
            self.close()
            raise
        batch = self.ranks * self.envs_per_rank * options["batch_T"]
        self.info = {"workers": self.ranks, "batch_size": batch}
        self.metrics = SyncMetrics(self.rank0, batch, self.info)

    def _open(self, workload, options):
        import multiprocessing as mp

        import torch
        import torch.distributed as dist
        if not dist.is_available():
            raise Unsupported("this torch build has no torch.distributed")
        device = workload.policy.device
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise Unsupported("no CUDA device")
        backend = options["backend"]
        if backend == "auto":
            backend = "nccl" if device.startswith("cuda") else "gloo"
        if backend == "nccl":
            if not dist.is_nccl_available():
                raise Unsupported("this torch build has no nccl (valid: backend=gloo)")
            if self.ranks > torch.cuda.device_count():
                raise Unsupported(f"nccl needs one GPU per rank: ranks={self.ranks} but "
                                  f"{torch.cuda.device_count()} GPU(s) (valid: backend=gloo)")
        if dist.is_initialized():
            raise RuntimeError("a torch.distributed process group already exists in this process")
        if options["context"] != "fork":
            self.helpers = HelperProcesses()
        timeout_s = options["timeout_s"]
        # rank 0 builds first: an unsupported env fails here, before any process starts
        self.rank0 = _Rank(0, workload, options, self.envs_per_rank)
        # port 0: the OS picks a free port, so there is no race for one
        self.store = dist.TCPStore(HOST, 0, self.ranks, True, timeout=timedelta(seconds=timeout_s),
                                   wait_for_workers=False)
        ctx = mp.get_context(options["context"])
        for rank in range(1, self.ranks):
            start_process(ctx, self.procs, _worker_main, f"rlpyt-sync-rank{rank}",
                          (rank, self.ranks, self.store.port, workload, options, self.envs_per_rank, backend))
        self._wait_ready(monotonic() + timeout_s)
        self.rank0.connect(self.store, self.ranks, backend, timeout_s)

    def _wait_ready(self, deadline):
        """Workers import torch and build their envs; a worker failing here fails open()."""
        pending = set(range(1, self.ranks))
        while pending:
            pending = {r for r in pending if not self.store.check([_key("ready", r)])}
            self._raise_if_dead()
            if pending and monotonic() > deadline:
                raise RuntimeError(f"rlpyt-sync: ranks {sorted(pending)} not ready within timeout_s")
            sleep(0.005)

    @property
    def worker_pids(self) -> list:
        """Process ids of ranks 1.. (rank 0 is this process)."""
        return [p.pid for p in self.procs]

    def _dead(self):
        """Why the first worker that has exited is gone ("rank R (pid P) exited with code C: error"),
        or None while all run."""
        for rank, p in enumerate(self.procs, 1):
            if p.exitcode is not None:
                error = ""
                try:
                    if self.store.check([_key("error", rank)]):
                        error = ": " + self.store.get(_key("error", rank)).decode(errors="replace")
                except Exception:
                    pass
                return f"rlpyt-sync rank {rank} (pid {p.pid}) exited with code {p.exitcode}{error}"
        return None

    def _raise_if_dead(self):
        dead = self._dead()
        if dead:
            self.failed = dead
            raise RuntimeError(dead)

    def _all_ranks(self, command: int, work):
        """Run `work` on rank 0 after telling every rank to do `command`; a failed collective
        becomes a RuntimeError that names the dead rank when there is one."""
        if self.failed:
            raise RuntimeError(f"rlpyt-sync session is broken: {self.failed}")
        self._raise_if_dead()
        try:
            self.rank0.command(command)
            return work()
        except Exception as exc:
            self.failed = f"rlpyt-sync collective failed: {type(exc).__name__}: {exc}"
            deadline = monotonic() + 5  # a killed peer shows as a closed connection before its exit code
            while monotonic() < deadline and not self._dead():
                sleep(0.01)
            self.failed = self._dead() or self.failed
            raise RuntimeError(self.failed) from exc

    def step(self) -> int:
        self._all_ranks(ITERATE, self.rank0.iterate)
        return self.ranks * self.envs_per_rank * self.rank0.batch_T

    def rank_params(self) -> list:
        """One flat float array of all parameters per rank, in rank order (for tests)."""
        return self._all_ranks(REPORT_PARAMS, self.rank0.gather_params)

    def close(self):
        if self._closed:
            return
        self._closed = True
        stopped = False
        try:
            if self.rank0 is not None and self.rank0.connected and not self.failed and not self._dead():
                self.rank0.command(STOP)
                stopped = True
        except Exception:
            pass
        finally:
            try:
                if self.rank0 is not None:
                    self.rank0.close()  # destroying the group also unblocks workers stuck in a collective
            finally:
                self.end_workers(grace_s=10 if stopped else 1)

    def drop_shared(self):
        self.store = None  # the master store stops serving once dropped


@register
class RlpytSync(Adapter):
    name = "rlpyt-sync"
    kind = "runner"
    description = ("rlpyt SyncRl natively: `ranks` processes each sample and run A2C on their own envs, "
                   "gradients all-reduced by torch DistributedDataParallel")
    requires = ("torch", "gymnasium")
    options = (
        Option("ranks", int, 2, "processes, each a DDP rank with num_envs // ranks envs (this process is rank 0)",
               low=1),
        Option("batch_T", int, 32, "time steps per env per iteration", low=1),
        Option("backend", str, "auto", "torch.distributed backend (auto: nccl on cuda, else gloo)",
               ("auto", "gloo", "nccl")),
        replace(CONTEXT_OPTION, default="spawn", help="multiprocessing start method of the worker ranks"),
        Option("lr", float, 1e-3, "Adam learning rate", low=0, open_low=True),
        Option("timeout_s", float, 60.0, "seconds a collective may wait for the other ranks before failing",
               low=0, open_low=True),
    )

    def supports(self, workload, options):
        return learner_reason(self.name, workload, lambda w: self._checks(w, options))

    def _checks(self, workload, options):
        ranks = options["ranks"]
        if workload.num_envs % ranks:
            return (f"{self.name} splits num_envs over ranks: num_envs={workload.num_envs} "
                    f"is not divisible by ranks={ranks}")
        if options["backend"] == "nccl" and not workload.policy.device.startswith("cuda"):
            return "backend nccl needs policy device cuda (valid: backend=gloo or auto)"
        return obs_reason(self.name, workload, ACT)

    def open(self, workload, options):
        return SyncSession(workload, options)


@register
class Ddp(RlpytSync):
    name = "ddp"
    kind = "learner"
    description = ("rlpyt-sync under the learner kind: synchronous data-parallel A2C, `ranks` processes with "
                   "their own envs, gradients all-reduced by torch DistributedDataParallel (gloo on CPU, nccl on GPUs)")

    def supports(self, workload, options):
        if env_info(workload.env_id).family in ("mujoco", "replay"):
            return f"ddp's A2C samples a categorical policy: needs a Discrete action space ({workload.env_id} has none)"
        return super().supports(workload, options)
