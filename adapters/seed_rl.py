"""`seed`: SEED RL's central inference (Espeholt et al. 2020, arXiv 1910.06591), written natively.

Actor processes only step their envs; per time step the learner (the cell process) runs one batched forward pass
for all of them, and one A2C update every batch_T steps, so the policy lag is 0. One unit is one learner update;
its env steps are the batch_T x num_envs transitions it consumed.

With `--policy lstm` the network is a recurrent actor-critic (SEED RL's recurrent agents): the central inference
keeps one LSTM state per env (zeroed where the env's episode starts), and the update re-unrolls the rollout from
the state at its start.

A Dict or Tuple observation (a screen beside game variables) is shared as one array per part, each in its own
dtype (procs.obs_specs); the central inference copies each part into its columns of the network's flat float input
(nets.obs_columns), converting as it copies, as it copies a Box's one array.
"""
import os
from time import perf_counter_ns

import numpy as np

from adapters._kit.a2c import a2c_loss, learner_options, learner_supports, sample_actions
from adapters._kit.batch import take
from adapters._kit.learner_nets import learner_reason
from adapters._kit.learner_stats import RETURN_WINDOW, Episodes, return_mean
from adapters._kit.nets import (
    actor_critic,
    learner_torch,
    obs_columns,
    obs_scale,
    obs_size,
    recurrent_actor_critic,
    torso_of,
)
from adapters._kit.procs import (
    ENV_NS,
    INFER_NS,
    LEARN_NS,
    STAT_COLUMNS,
    WAIT_NS,
    WORKER_OPTIONS,
    EnvSlice,
    HelperProcesses,
    MasterWatch,
    SharedArrays,
    Window,
    WorkerSession,
    acquire,
    obs_batch,
    obs_specs,
    pin,
    raise_if_exited,
    spaces,
    start_process,
    worker_cpus,
)
from rlbench.api import Adapter, Unsupported, Workload, register

# columns of `stats` past the shared ones (row 0 the learner, 1.. actors)
TRANSFER_NS, H2D_BYTES, STATS = STAT_COLUMNS, STAT_COLUMNS + 1, STAT_COLUMNS + 2


def actor_main(rank, workload_dict, lo, hi, shared, sems, cpus, master_pid, obs_space):
    """Step envs lo..hi-1 once per action handed over; nothing else (no policy, no torch)."""
    pin(cpus)
    workload = Workload.from_dict(workload_dict)
    buf = shared.views()
    stats, stop, t_now = buf["stats"][rank + 1], buf["stop"], buf["t"]
    master = MasterWatch(master_pid)

    def master_alive():
        if master.gone():
            raise SystemExit(0)

    act_ready, obs_ready = sems
    envs = EnvSlice(workload, lo, hi, take(obs_batch(buf["obs_now"], obs_space), slice(lo, hi)))
    try:
        obs_ready.release()  # first observations written
        while True:
            stats[WAIT_NS] += acquire(act_ready, master_alive)
            if stop[0]:
                return
            t = int(t_now[0])
            t0 = perf_counter_ns()
            envs.step(buf["act_now"][lo:hi], buf["rew"][t, lo:hi], buf["done"][t, lo:hi])
            stats[ENV_NS] += perf_counter_ns() - t0
            obs_ready.release()
    finally:
        envs.close()


class SeedSession(WorkerSession):
    def __init__(self, workload, options):
        import multiprocessing as mp
        self.workload, self.opts = workload, options
        self.procs, self.sems, self.helpers = [], [], None
        self.T, self.B, workers = options["batch_T"], workload.num_envs, options["workers"]
        obs_space, act_space = spaces(workload)
        if not hasattr(act_space, "n"):
            raise Unsupported("seed samples a categorical policy: needs a Discrete action space")
        self.action_start = int(getattr(act_space, "start", 0))
        ctx = mp.get_context(options["context"])
        if options["context"] != "fork":
            self.helpers = HelperProcesses()
        T, B = self.T, self.B
        self.shared = SharedArrays(ctx, {
            **obs_specs("obs_now", obs_space, (B,)), "act_now": ((B,), np.int64),
            "rew": ((T, B), np.float32), "done": ((T, B), np.bool_), "t": ((1,), np.int64),
            "stats": ((workers + 1, STATS), np.float64), "stop": ((1,), np.int64),
            "returns": ((1, RETURN_WINDOW), np.float64), "episodes": ((1,), np.int64)})
        self.buf = self.shared.views()
        self.stats = self.buf["stats"][0]
        self.window = Window(self.buf["stats"])
        self.episodes = Episodes(B, self.buf["returns"][0], self.buf["episodes"])
        self.updates = self.steps = 0
        self.metrics = self
        self.info = {"workers": workers, "batch_size": T * B}
        try:
            per = B // workers
            for rank, cpus in enumerate(worker_cpus(options["worker_affinity"], workers)):
                self.sems.append((ctx.Semaphore(0), ctx.Semaphore(0)))
                start_process(ctx, self.procs, actor_main, f"seed-actor-{rank}",
                              (rank, workload.to_dict(), rank * per, (rank + 1) * per, self.shared, self.sems[rank],
                               cpus, os.getpid(), obs_space))
            self._wait_all()  # first observations
            self._build_learner(obs_space, act_space)  # torch only after the fork
        except BaseException:
            self.close()
            raise

    def _build_learner(self, obs_space, act_space):
        policy = self.workload.policy
        torch, self.device = learner_torch(policy, self.workload.seed)
        self.torch = torch
        self.cuda = self.device.type == "cuda"
        n_actions, size, T, B = int(act_space.n), obs_size(obs_space), self.T, self.B
        torso = torso_of(policy, obs_space)
        self.recurrent = bool(torso.lstm)
        self.net = (recurrent_actor_critic if self.recurrent else actor_critic)(torso, n_actions).to(self.device)
        self.optim = torch.optim.Adam(self.net.parameters(), lr=self.opts["lr"])
        self.gen = torch.Generator(self.device)
        self.gen.manual_seed(self.workload.seed * 1000 + 1)
        self.scale = obs_scale(obs_space.dtype)
        # (columns of the flat input, the shared memory itself) per part: a Box has one, all the columns
        parts = obs_columns(obs_batch(self.buf["obs_now"], obs_space), obs_space)
        self.obs_host = [(cols, torch.from_numpy(a).reshape(B, -1)) for cols, a in parts]
        self.obs_bytes = sum(a.nbytes for _, a in parts)
        self.traj_obs = torch.zeros((T + 1, B, size), dtype=torch.float32, device=self.device)
        self.traj_act = torch.zeros((T, B), dtype=torch.int64, device=self.device)
        self.traj_logits = torch.zeros((T, B, n_actions), dtype=torch.float32, device=self.device)
        if self.recurrent:  # one state per env, carried across rollouts; every env starts an episode
            self.state = self.net.initial_state(B, self.device)
            self.first = np.ones(B, dtype=np.bool_)
            self.traj_first = torch.zeros((T + 1, B), dtype=torch.bool, device=self.device)

    def _actors_alive(self):
        raise_if_exited(self.procs, "seed actor")

    def _release_all(self):
        for act_ready, _ in self.sems:
            act_ready.release()

    def _wait_all(self):
        for _, obs_ready in self.sems:
            acquire(obs_ready, self._actors_alive)

    def _observe(self, t):
        """The actors' newest observations into the trajectory (on the learner's device)."""
        t0 = perf_counter_ns()
        x = self.traj_obs[t]
        for cols, host in self.obs_host:
            x[:, cols].copy_(host)  # converts to float32 (and crosses to the device) in one copy
        if self.scale != 1.0:
            x.mul_(self.scale)
        self.stats[TRANSFER_NS] += perf_counter_ns() - t0
        self.stats[H2D_BYTES] += self.obs_bytes if self.cuda else 0
        return x

    def _first(self, t):
        """The episode-start flags of the observations at step t into the trajectory (on the learner's device)."""
        first = self.traj_first[t]
        first.copy_(self.torch.from_numpy(self.first))
        self.stats[H2D_BYTES] += self.first.nbytes if self.cuda else 0
        return first

    def step(self) -> int:
        torch, stats, act_now = self.torch, self.stats, self.buf["act_now"]
        if self.recurrent:
            self.start_state = self.state  # the update unrolls from here (zeroed where first[0] is set)
        for t in range(self.T):
            x = self._observe(t)
            t0 = perf_counter_ns()
            with torch.no_grad():
                if self.recurrent:
                    first = self._first(t)
                    logits, _, self.state = self.net.step(x, first, self.state)
                else:
                    logits, _ = self.net(x)
                actions = sample_actions(torch, logits, self.gen)
            self.traj_logits[t] = logits
            self.traj_act[t] = actions
            act_now[:] = actions.cpu().numpy()  # .cpu() waits for the device
            if self.action_start:
                act_now += self.action_start
            stats[INFER_NS] += perf_counter_ns() - t0
            self.buf["t"][0] = t
            t1 = perf_counter_ns()  # handing over and waiting: an actor woken here may take this CPU
            self._release_all()
            self._wait_all()
            stats[WAIT_NS] += perf_counter_ns() - t1
            self.steps += self.B
            if self.recurrent:
                self.first = self.buf["done"][t].copy()  # an env that finished is reset: its next step starts one
        self._observe(self.T)  # bootstraps the returns
        if self.recurrent:
            self._first(self.T)
        self._learn()
        self.episodes.add(self.buf["rew"], self.buf["done"])
        self.updates += 1
        return self.T * self.B

    def _learn(self):
        torch, T, B = self.torch, self.T, self.B
        t0 = perf_counter_ns()
        rew = torch.as_tensor(self.buf["rew"]).to(self.device)
        done = torch.as_tensor(self.buf["done"]).to(self.device, torch.float32)
        t1 = perf_counter_ns()
        if self.recurrent:  # re-unrolled from the state the rollout started with
            logits, values, _ = self.net.unroll(self.traj_obs, self.traj_first, self.start_state)
            logits = logits.reshape((T + 1) * B, -1)
        else:
            logits, values = self.net(self.traj_obs.reshape((T + 1) * B, -1))
        values = values.reshape(T + 1, B)
        loss = a2c_loss(torch, logits[:T * B].reshape(T, B, -1), values[:T], values[T].detach(),
                        self.traj_act, rew, done)
        self.optim.zero_grad(set_to_none=True)
        loss.backward()
        if self.opts["max_grad_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(self.net.parameters(), self.opts["max_grad_norm"])
        self.optim.step()
        if self.cuda:
            torch.cuda.synchronize(self.device)
        self.stats[TRANSFER_NS] += t1 - t0
        self.stats[H2D_BYTES] += (self.buf["rew"].nbytes + self.buf["done"].nbytes) if self.cuda else 0
        self.stats[LEARN_NS] += perf_counter_ns() - t1

    # -- metrics over the timed window ------------------------------------------------------------------
    def reset(self):
        self.window.reset()
        self.mark = (self.updates, self.steps)

    def read(self, seconds):
        updates, steps = self.updates - self.mark[0], self.steps - self.mark[1]
        delta = self.window.delta()
        d = delta / (seconds * 1e9)
        learner, actors = d[0], d[1:]
        self.info["policy_lag_hist"] = [updates]  # every batch acted on with the newest parameters
        return {"updates_per_s": updates / seconds, "samples_per_s": updates * self.T * self.B / seconds,
                "actor_steps_per_s": steps / seconds,
                "policy_lag_mean": 0.0 if updates else float("nan"),
                "policy_lag_max": 0.0 if updates else float("nan"),
                "env_frac": float(actors[:, ENV_NS].mean()), "inference_frac": float(learner[INFER_NS]),
                "learn_frac": float(learner[LEARN_NS]), "wait_frac": float(learner[WAIT_NS]),
                "transfer_frac": float(learner[TRANSFER_NS]), "sync_frac": 0.0,
                "queue_wait_ms": float(delta[0, WAIT_NS]) / 1e6 / updates if updates else float("nan"),
                "h2d_mb_per_s": float(delta[0, H2D_BYTES]) / 1e6 / seconds,
                "return_mean": self.return_mean()}

    def return_mean(self) -> float:
        """Mean return of the last RETURN_WINDOW episodes the actors finished (nan before the first)."""
        return return_mean(self.buf["returns"], self.buf["episodes"])

    def drop_shared(self):
        self.sems = []

    def close(self):
        self.buf["stop"][0] = 1
        self._release_all()
        self.end_workers()


@register
class Seed(Adapter):
    name = "seed"
    kind = "learner"
    description = ("SEED RL central inference: actors only step envs; the learner runs one batched forward "
                   "for all of them per step on its device, and an A2C update every batch_T steps (lag 0)")
    requires = ("gymnasium", "torch")
    options = learner_options(batch_T=16, lr=2e-3) + WORKER_OPTIONS

    def supports(self, workload, options):
        return learner_reason(self.name, workload, lambda w: learner_supports(self.name, w, options))

    def open(self, workload, options):
        return SeedSession(workload, options)
