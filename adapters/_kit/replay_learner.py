"""The learner session apex and r2d2 share: actor processes writing a shared prioritized replay
(adapters._kit.prioritized), the learner's parameters in shared memory, the learner's update, its metrics over
the timed window, and close. A subclass says what differs: its replay's fields, its Q-network, the items an actor
writes at most in one flush, the upload of a sampled batch and the learning step. torch is imported only in the
learner, after the actors have started, so importing this module imports no framework.
"""
import os
import time
from time import perf_counter_ns

import numpy as np

from adapters._kit.dqn import SharedParams, memory_check
from adapters._kit.learner_stats import RETURN_WINDOW, return_mean
from adapters._kit.nets import learner_torch, space_scale
from adapters._kit.prioritized import ReplayIndex, SharedReplay
from adapters._kit.procs import (
    ENV_NS,
    INFER_NS,
    LEARN_NS,
    STAT_COLUMNS,
    SYNC_NS,
    WAIT_NS,
    HelperProcesses,
    SharedArrays,
    Window,
    WorkerSession,
    raise_if_exited,
    spaces,
    start_process,
    worker_cpus,
)
from rlbench.api import Unsupported

XFER_NS, H2D_BYTES, STATS = STAT_COLUMNS, STAT_COLUMNS + 1, STAT_COLUMNS + 2  # columns past the shared ones
WAIT_POLL_S = 1e-3   # the learner's poll while the replay fills to learn_start


class ReplayLearner(WorkerSession):
    """One apex or r2d2 cell: starts `workers` actor processes, each stepping num_envs / workers envs and
    writing its own ring of the shared replay; one unit of work is one learner update."""
    name = ""                 # the adapter's: its messages and actor process names
    # staticmethods of the subclass:
    actor_main = None         # the actors' process function (a module-level function, picklable)
    make_torso = None         # (policy, observation space) -> the Q-network's Torso (adapters._kit.nets), torch-free
    net_params = None         # (torso, n_actions) -> the Q-network's parameter count, without torch
    make_net = None           # (torso, n_actions) -> the Q-network (a torch module)

    def fields(self, obs_space) -> dict:
        """The replay's item layout: {name: (shape, dtype)}; a Dict's or Tuple's observation parts are fields of
        their own, named as procs.obs_specs names them (`obs/screen`)."""
        raise NotImplementedError

    def flush_items(self, per: int) -> int:
        """The most items an actor of `per` envs writes in one go."""
        raise NotImplementedError

    def flush_what(self, per: int) -> str:
        """What an actor's ring must hold at least, told in the message when it cannot."""
        raise NotImplementedError

    def learned_per_item(self) -> int:
        """Time steps trained on per sampled item."""
        return 1

    def upload(self, host: dict):
        """The sampled batch on the learner's device: (the arguments of `_learn` before the weights, the bytes
        copied)."""
        raise NotImplementedError

    def extra_metrics(self, items: int, seconds: float) -> dict:
        """The adapter's own metrics, after replay_ratio; `items` sampled over the window."""
        return {}

    def __init__(self, workload, options):
        import multiprocessing as mp
        self.workload, self.opts = workload, options
        self.procs, self.helpers = [], None
        workers, B = options["workers"], options["batch"]
        obs_space, act_space = spaces(workload)
        self.obs_space = obs_space   # an array, or a Dict or Tuple whose parts are fields of their own
        if not hasattr(act_space, "n"):
            raise Unsupported(f"{self.name} acts epsilon-greedily: needs a Discrete action space")
        self.torso = self.make_torso(workload.policy, obs_space)
        fields = self.fields(obs_space)
        ctx = mp.get_context(options["context"])
        if options["context"] != "fork":
            self.helpers = HelperProcesses()
        self.replay = SharedReplay(ctx, fields, options["capacity"], workers)
        reason = memory_check(self.name, self.replay.item_bytes, self.replay.capacity)
        if reason:
            raise Unsupported(reason)
        per = workload.num_envs // workers
        flush = self.flush_items(per)  # the most one flush writes
        if flush > self.replay.per:
            raise Unsupported(f"{self.name}: capacity {options['capacity']} leaves each of {workers} actors fewer "
                              f"slots ({self.replay.per}) than {self.flush_what(per)}")
        self.n_actions = int(act_space.n)
        self.params = SharedParams(ctx, self.net_params(self.torso, self.n_actions))
        self.shared = SharedArrays(ctx, {
            "stats": ((workers + 1, STATS), np.float64), "steps": ((workers,), np.int64),
            "returns": ((workers, -(-RETURN_WINDOW // workers)), np.float64), "episodes": ((workers,), np.int64),
            "stop": ((1,), np.int64)})
        self.buf = self.shared.views()
        self.stats = self.buf["stats"][0]
        self.window = Window(self.buf["stats"])
        self.index = ReplayIndex(self.replay, workload.seed + 7)
        self.learn_start = max(options["learn_start"], B)
        self.learned = self.learned_per_item()
        self.updates = self.steps_seen = 0
        self.lag = {"policy": [0, 0, 0], "priority": [0, 0, 0]}  # sum, count, max over the window
        self.metrics = self
        self.info = {"workers": workers, "batch_size": B * self.learned, "item_bytes": self.replay.item_bytes,
                     "capacity_items": self.replay.capacity}
        try:
            actor_opts = dict(options, slack=self.learn_start + workers * flush)
            for rank, cpus in enumerate(worker_cpus(options["worker_affinity"], workers)):
                start_process(ctx, self.procs, self.actor_main, f"{self.name}-actor-{rank}",
                              (rank, workload.to_dict(), rank * per, (rank + 1) * per, actor_opts, self.replay,
                               self.params, self.shared, cpus, os.getpid(), obs_space))
            self._build_learner(fields)  # torch only after the fork
        except BaseException:
            self.close()
            raise

    def _build_learner(self, fields):
        policy = self.workload.policy
        torch, self.device = learner_torch(policy, self.workload.seed)
        self.torch = torch
        self.cuda = self.device.type == "cuda"
        self.net = self.make_net(self.torso, self.n_actions).to(self.device)
        self.target = self.make_net(self.torso, self.n_actions).to(self.device)
        self.target.load_state_dict(self.net.state_dict())
        self.optim = torch.optim.Adam(self.net.parameters(), lr=self.opts["lr"])
        self.scale = space_scale(self.obs_space)   # a Dict's or Tuple's images: scaled in the torso
        B = self.opts["batch"]
        self.host = {}
        for k, (shape, dtype) in fields.items():
            a = np.empty((B, *shape), dtype=dtype)
            self.host[k] = torch.from_numpy(a).pin_memory().numpy() if self.cuda else a
        self.params.publish(self.net, 0)

    def _actors_alive(self):
        raise_if_exited(self.procs, f"{self.name} actor")

    def _fill(self) -> int:
        """Take in what the actors wrote; the first updates wait until the replay holds learn_start items.
        Returns the ns spent waiting."""
        waited = 0
        while True:
            self.index.ingest()
            if self.index.added >= self.learn_start:
                return waited
            self._actors_alive()
            t0 = perf_counter_ns()
            time.sleep(WAIT_POLL_S)
            waited += perf_counter_ns() - t0

    def _lags(self, kind, lags):
        acc = self.lag[kind]
        acc[0] += int(lags.sum())
        acc[1] += len(lags)
        acc[2] = max(acc[2], int(lags.max()))

    def step(self) -> int:
        torch, stats, host, dev = self.torch, self.stats, self.host, self.device
        self._actors_alive()
        t0 = perf_counter_ns()
        waited = self._fill()
        t1 = perf_counter_ns()
        idx, weights, seqs = self.index.sample(self.opts["batch"])
        self.index.gather(idx, seqs, host)
        self._lags("policy", self.updates - host["version"])
        self._lags("priority", self.updates - self.index.priority_version[idx])
        batch, nbytes = self.upload(host)
        w = torch.from_numpy(weights).to(dev, torch.float32)
        if self.cuda:
            stats[H2D_BYTES] += nbytes + weights.nbytes
        t2 = perf_counter_ns()
        priorities = self._learn(*batch, w)
        t3 = perf_counter_ns()
        self.index.update(idx, seqs, priorities, self.updates)
        self.updates += 1
        t4 = perf_counter_ns()
        if self.updates % self.opts["target_every"] == 0:
            self.target.load_state_dict(self.net.state_dict())
        if self.updates % self.opts["publish_every"] == 0:
            self.params.publish(self.net, self.updates)
        t5 = perf_counter_ns()
        stats[WAIT_NS] += waited
        stats[XFER_NS] += (t1 - t0 - waited) + (t2 - t1) + (t4 - t3)
        stats[LEARN_NS] += t3 - t2
        stats[SYNC_NS] += t5 - t4
        made = int(self.buf["steps"].sum())
        made, self.steps_seen = made - self.steps_seen, made
        return made

    # -- metrics over the timed window ------------------------------------------------------------------
    def reset(self):
        self.window.reset()
        self.mark = (self.updates, int(self.buf["steps"].sum()))
        self.lag = {"policy": [0, 0, 0], "priority": [0, 0, 0]}

    def read(self, seconds):
        updates, steps = self.updates - self.mark[0], int(self.buf["steps"].sum()) - self.mark[1]
        delta = self.window.delta()
        d = delta / (seconds * 1e9)
        learner, actors = d[0], d[1:]
        items = updates * self.opts["batch"]
        sampled = items * self.learned
        pol, pri = self.lag["policy"], self.lag["priority"]
        nan = float("nan")
        out = {"updates_per_s": updates / seconds, "samples_per_s": sampled / seconds,
               "actor_steps_per_s": steps / seconds, "replay_ratio": sampled / steps if steps else nan}
        out.update(self.extra_metrics(items, seconds))
        out.update({
            "policy_lag_mean": pol[0] / pol[1] if pol[1] else nan, "policy_lag_max": pol[2] if pol[1] else nan,
            "priority_lag_mean": pri[0] / pri[1] if pri[1] else nan,
            "env_frac": float(actors[:, ENV_NS].mean()), "inference_frac": float(actors[:, INFER_NS].mean()),
            "learn_frac": float(learner[LEARN_NS]), "wait_frac": float(learner[WAIT_NS]),
            "transfer_frac": float(learner[XFER_NS]), "sync_frac": float(learner[SYNC_NS]),
            "queue_wait_ms": float(delta[0, WAIT_NS]) / 1e6 / updates if updates else nan,
            "h2d_mb_per_s": float(delta[0, H2D_BYTES]) / 1e6 / seconds,
            "return_mean": self.return_mean()})
        return out

    def return_mean(self) -> float:
        """Mean return of about the last RETURN_WINDOW episodes (the last RETURN_WINDOW / workers of each actor,
        whatever its exploration rate); nan before the first."""
        return return_mean(self.buf["returns"], self.buf["episodes"])

    def close(self):
        if hasattr(self, "buf"):
            self.buf["stop"][0] = 1
        self.end_workers()
