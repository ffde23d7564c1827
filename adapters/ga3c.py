"""`ga3c`: GA3C, the hybrid CPU/GPU A3C (Babaeizadeh et al., ICLR 2017), written natively from the paper's design.

Agent processes only step envs; predictor threads in the cell process answer their prediction requests in
batches, and trainer threads run A2C updates on the experience agents queue. One unit is one trainer update;
its env steps are the transitions it consumed. How it is built: docs/strategies/learners.md.

A Dict or Tuple observation (a screen beside game variables) travels in the queues as one array per part, each in
its own dtype (procs.obs_arrays: a uint8 screen stays uint8); predictors and trainers join the parts of their
batch and hand the network its one flat float input (nets.net_input), a Box exactly as before.
"""
import os
import queue
import threading
from collections import deque
from time import perf_counter, perf_counter_ns

import numpy as np

from adapters._kit.a2c import a2c_loss, learner_supports, sample_actions
from adapters._kit.batch import join, put, take
from adapters._kit.learner_nets import learner_reason
from adapters._kit.learner_stats import RETURN_WINDOW, Episodes, lag_stats, return_mean, trimmed
from adapters._kit.nets import actor_critic, map_obs, net_input, space_scale, torso_of
from adapters._kit.procs import (
    CONTEXT_OPTION,
    ENV_NS,
    INFER_NS,
    LEARN_NS,
    POLL_S,
    STAT_COLUMNS,
    WAIT_NS,
    EnvSlice,
    HelperProcesses,
    MasterWatch,
    SharedArrays,
    Window,
    WorkerSession,
    obs_arrays,
    pin,
    raise_if_exited,
    spaces,
    start_process,
    worker_cpus,
)
from rlbench.api import Adapter, Option, Unsupported, Workload, register

XFER_NS, H2D_BYTES = STAT_COLUMNS - 2, STAT_COLUMNS - 1  # stats columns of our own (past LEARN_NS)
QUICK_POLL_S = 0.05  # how often a blocked agent or learner thread looks whether the session is closing
JOIN_S = 5.0


def agent_main(rank, row, workload_dict, lo, hi, t_max, obs_space, pred_q, train_q, conn, shared, cpus, master_pid):
    """Step envs lo..hi-1: per step ask the predictors for actions and wait; every t_max steps hand the
    experience to the trainers. No network here."""
    pin(cpus)
    workload = Workload.from_dict(workload_dict)
    buf = shared.views()
    stats, stop, made = buf["stats"][row], buf["stop"], buf["steps"]
    master = MasterWatch(master_pid)
    for q in (pred_q, train_q):
        q.cancel_join_thread()  # a stopping agent never waits for its queued puts to reach the learner

    def give_up():
        return bool(stop[0]) or master.gone()

    n = hi - lo
    obs_now = obs_arrays(obs_space, (n,))
    envs = EnvSlice(workload, lo, hi, obs_now)
    start = int(getattr(envs.envs[0].action_space, "start", 0))
    episodes = Episodes(n, buf["returns"][rank], buf["episodes"][rank:rank + 1])
    try:
        while not give_up():
            # fresh arrays (a put pickles later), one per part of a Dict or Tuple
            obs = map_obs(lambda a: np.empty((t_max + 1, *a.shape), a.dtype), obs_now)
            act, ver = np.empty((t_max, n), np.int64), np.empty(t_max, np.int64)
            rew, done = np.zeros((t_max, n), np.float32), np.zeros((t_max, n), np.bool_)
            for t in range(t_max):
                put(obs, t, obs_now)
                t0 = perf_counter_ns()
                pred_q.put((rank, take(obs, t)))
                while not conn.poll(QUICK_POLL_S):
                    if give_up():
                        return
                act[t], ver[t] = conn.recv()
                t1 = perf_counter_ns()
                envs.step(act[t] + start if start else act[t], rew[t], done[t])
                stats[WAIT_NS] += t1 - t0
                stats[ENV_NS] += perf_counter_ns() - t1
            put(obs, t_max, obs_now)
            episodes.add(rew, done)
            made[rank] += t_max * n
            t2 = perf_counter_ns()
            while True:
                try:
                    train_q.put((rank, obs, act, rew, done, ver), timeout=QUICK_POLL_S)
                    break
                except queue.Full:  # the trainers are behind by max_queue experiences
                    if give_up():
                        return
            stats[WAIT_NS] += perf_counter_ns() - t2
    finally:
        envs.close()


def qsize(q) -> float:
    try:
        return float(q.qsize())
    except NotImplementedError:  # macOS has no sem_getvalue
        return float("nan")


class Counters:
    """What the learner threads count, read together under one lock (the session's condition)."""

    def __init__(self):
        self.updates = self.consumed = self.experiences = 0
        self.batches = self.requests = 0
        self.pred_qlen = self.train_qlen = 0.0
        self.lag_hist = np.zeros(2, np.int64)

    def snapshot(self) -> dict:
        return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(self).items()}


class GA3CSession(WorkerSession):
    def __init__(self, workload, options):
        import multiprocessing as mp
        self.workload, self.opts = workload, options
        self.procs, self.threads, self.conns, self.queues, self.helpers = [], [], [], [], None
        self.closing = threading.Event()
        self.cond = threading.Condition()
        self.counts = Counters()
        self.made = deque()   # transitions of each update step() has not returned yet
        self.failure = None   # (thread name, exception) of a learner thread that died
        agents, P, R = options["agents"], options["predictors"], options["trainers"]
        self.T, self.n = options["t_max"], workload.num_envs // agents
        obs_space, act_space = spaces(workload)
        if not hasattr(act_space, "n"):
            raise Unsupported("ga3c samples a categorical policy: needs a Discrete action space")
        if workload.policy.device.startswith("cuda"):
            import torch  # agents never touch it; checked before any starts
            if not torch.cuda.is_available():
                raise Unsupported("no CUDA device")
        self.obs_space = obs_space
        self.rows = {"predictor": 0, "trainer": P, "agent": P + R}
        ctx = mp.get_context(options["context"])
        if options["context"] != "fork":
            self.helpers = HelperProcesses()
        ring = -(-RETURN_WINDOW // agents)
        self.shared = SharedArrays(ctx, {
            "stats": ((P + R + agents, STAT_COLUMNS), np.float64), "steps": ((agents,), np.int64),
            "returns": ((agents, ring), np.float64), "episodes": ((agents,), np.int64), "stop": ((1,), np.int64)})
        self.buf = self.shared.views()
        self.window = Window(self.buf["stats"])
        self.metrics = self
        self.info = {"workers": agents, "batch_size": options["train_batch"] * self.T * self.n}
        try:
            self.pred_q, self.train_q = ctx.Queue(), ctx.Queue(options["max_queue"])
            self.queues = [self.pred_q, self.train_q]
            for rank, cpus in enumerate(worker_cpus(options["worker_affinity"], agents)):
                recv_end, send_end = ctx.Pipe(duplex=False)
                self.conns.append(send_end)
                start_process(ctx, self.procs, agent_main, f"ga3c-agent-{rank}",
                              (rank, P + R + rank, workload.to_dict(), rank * self.n, (rank + 1) * self.n, self.T,
                               obs_space, self.pred_q, self.train_q, recv_end,
                               self.shared, cpus, os.getpid()))
                recv_end.close()  # the agent holds it now
            self._build_learner(int(act_space.n))  # torch only after the fork
            for kind, count, target in (("predictor", P, self._predictor), ("trainer", R, self._trainer)):
                for i in range(count):
                    thread = threading.Thread(target=self._guard, args=(f"{kind} {i}", target, i),
                                              name=f"ga3c-{kind}-{i}", daemon=True)
                    thread.start()
                    self.threads.append(thread)
        except BaseException:
            self.close()
            raise

    def _build_learner(self, n_actions):
        import torch
        policy = self.workload.policy
        self.torch = torch
        torch.set_num_threads(policy.threads)
        torch.manual_seed(self.workload.seed)
        self.device = torch.device(policy.device)
        self.cuda = self.device.type == "cuda"
        self.scale = space_scale(self.obs_space)
        self.net = actor_critic(torso_of(policy, self.obs_space), n_actions).to(self.device)
        self.optim = torch.optim.Adam(self.net.parameters(), lr=self.opts["lr"])
        self.model_lock = threading.Lock()  # one update at a time (predictors do not take it)
        self.version = 0                    # updates applied

    # -- the learner's threads ----------------------------------------------------------------------------
    def _guard(self, name, target, i):
        try:
            target(i)
        except BaseException as exc:
            if not self.closing.is_set():
                with self.cond:
                    self.failure = self.failure or (name, exc)
                    self.cond.notify_all()

    def _get(self, q, stats):
        """The next item of q (None once the session closes); the wait goes to stats[WAIT_NS]."""
        t0 = perf_counter_ns()
        try:
            while not self.closing.is_set():
                try:
                    return q.get(timeout=QUICK_POLL_S)
                except queue.Empty:
                    pass
            return None
        finally:
            stats[WAIT_NS] += perf_counter_ns() - t0

    def _to_device(self, array, stats):
        x = self.torch.from_numpy(array)
        stats[H2D_BYTES] += array.nbytes if self.cuda else 0
        return x.to(self.device, non_blocking=False)

    def _input(self, obs, rows: int, stats):
        """The network's flat float input from a batch of `rows` observations (an array, or a dict or tuple of
        them), each array on the device before it is converted (a uint8 screen crosses as uint8)."""
        x = net_input(obs, lambda a: self._to_device(a.reshape(rows, -1), stats).float())
        return x.mul_(self.scale) if self.scale != 1.0 else x

    def _predictor(self, i):
        torch, stats = self.torch, self.buf["stats"][self.rows["predictor"] + i]
        gen = torch.Generator(self.device)
        gen.manual_seed(self.workload.seed * 1000 + 1 + i)
        cap = min(self.opts["predict_batch"], self.opts["agents"])  # an agent has one request out at a time
        wait_s = self.opts["predict_wait_ms"] / 1e3
        while True:
            waiting = qsize(self.pred_q)
            first = self._get(self.pred_q, stats)
            if first is None:
                return
            t0 = perf_counter_ns()
            batch, deadline = [first], perf_counter() + wait_s
            while len(batch) < cap:
                try:
                    left = deadline - perf_counter()
                    batch.append(self.pred_q.get(timeout=left) if left > 0 else self.pred_q.get_nowait())
                except queue.Empty:
                    break
            x = self._input(join([o for _, o in batch]), len(batch) * self.n, stats)
            t1 = perf_counter_ns()
            version = self.version
            with torch.no_grad():
                logits, _ = self.net(x)
                actions = sample_actions(torch, logits, gen).cpu().numpy()  # .cpu() waits for the device
            t2 = perf_counter_ns()
            for k, (rank, _) in enumerate(batch):
                try:
                    self.conns[rank].send((actions[k * self.n:(k + 1) * self.n], version))
                except (BrokenPipeError, ConnectionResetError):
                    pass  # that agent died: step() reports it
            stats[INFER_NS] += t2 - t1
            stats[XFER_NS] += (t1 - t0) + (perf_counter_ns() - t2)
            with self.cond:
                c = self.counts
                c.batches += 1
                c.requests += len(batch)
                c.pred_qlen += waiting

    def _trainer(self, i):
        torch, stats = self.torch, self.buf["stats"][self.rows["trainer"] + i]
        T, clip = self.T, self.opts["max_grad_norm"]
        while True:
            waiting = qsize(self.train_q)
            first = self._get(self.train_q, stats)
            if first is None:
                return
            t0 = perf_counter_ns()
            batch = [first]
            while len(batch) < self.opts["train_batch"]:
                try:
                    batch.append(self.train_q.get_nowait())
                except queue.Empty:
                    break
            _, obs, act, rew, done, ver = (list(part) for part in zip(*batch))
            N = sum(a.shape[1] for a in act)
            obs = self._input(join(obs, axis=1), (T + 1) * N, stats)
            act = self._to_device(np.concatenate(act, axis=1), stats)
            rew = self._to_device(np.concatenate(rew, axis=1), stats)
            done = self._to_device(np.concatenate(done, axis=1), stats).float()
            ver = np.stack(ver)  # [experiences, T]: the version that chose each step's actions
            t1 = perf_counter_ns()
            with self.model_lock:
                version = self.version
                logits, values = self.net(obs)
                values = values.reshape(T + 1, N)
                loss = a2c_loss(torch, logits[:T * N].reshape(T, N, -1), values[:T], values[T].detach(),
                                act, rew, done)
                self.optim.zero_grad(set_to_none=True)
                loss.backward()
                if clip > 0:
                    torch.nn.utils.clip_grad_norm_(self.net.parameters(), clip)
                self.optim.step()
                if self.cuda:
                    torch.cuda.synchronize(self.device)
                self.version = version + 1
            stats[XFER_NS] += t1 - t0
            stats[LEARN_NS] += perf_counter_ns() - t1
            lags = np.bincount((version - ver).ravel())
            with self.cond:
                c = self.counts
                if lags.size > c.lag_hist.size:
                    c.lag_hist = np.pad(c.lag_hist, (0, lags.size - c.lag_hist.size))
                c.lag_hist[:lags.size] += lags
                c.updates += 1
                c.consumed += T * N
                c.experiences += len(batch)
                c.train_qlen += waiting
                self.made.append(T * N)
                self.cond.notify_all()

    # -- the harness's side ---------------------------------------------------------------------------------
    def _check(self):
        raise_if_exited(self.procs, "ga3c agent")
        if self.failure is not None:
            name, exc = self.failure
            raise RuntimeError(f"ga3c {name} failed: {exc!r}") from exc

    def step(self) -> int:
        """Wait for the next trainer update; its transitions."""
        self._check()  # the other agents may keep the trainers busy: a dead agent must not go unnoticed
        with self.cond:
            while not self.made:
                self.cond.wait(POLL_S)
                self._check()
            return self.made.popleft()

    def return_mean(self) -> float:
        """Mean return of about the last RETURN_WINDOW finished episodes (nan before the first)."""
        return return_mean(self.buf["returns"], self.buf["episodes"])

    def reset(self):
        with self.cond:
            self.window.reset()
            self.mark = self.counts.snapshot()
        self.mark_made = int(self.buf["steps"].sum())

    def read(self, seconds):
        with self.cond:
            now = self.counts.snapshot()
            delta = self.window.delta()
        m = self.mark
        made = int(self.buf["steps"].sum()) - self.mark_made
        updates, batches = now["updates"] - m["updates"], now["batches"] - m["batches"]
        hist = now["lag_hist"] - np.pad(m["lag_hist"], (0, now["lag_hist"].size - m["lag_hist"].size))
        self.info["policy_lag_hist"] = trimmed(hist)
        d = delta / (seconds * 1e9)
        P, R = self.opts["predictors"], self.opts["trainers"]
        pred, train, agents = d[:P], d[P:P + R], d[P + R:]
        nan = float("nan")

        def per(count, what):
            return (now[what] - m[what]) / count if count else nan

        return {
            "updates_per_s": updates / seconds,
            "samples_per_s": (now["consumed"] - m["consumed"]) / seconds,
            "actor_steps_per_s": made / seconds,
            **lag_stats(hist),
            "prediction_queue_mean": per(batches, "pred_qlen"), "training_queue_mean": per(updates, "train_qlen"),
            "predict_batch_mean": per(batches, "requests"), "train_batch_mean": per(updates, "experiences"),
            "queue_wait_ms": float(delta[P:P + R, WAIT_NS].sum()) / 1e6 / updates if updates else nan,
            "env_frac": float(agents[:, ENV_NS].mean()), "inference_frac": float(pred[:, INFER_NS].mean()),
            "learn_frac": float(train[:, LEARN_NS].mean()), "wait_frac": float(train[:, WAIT_NS].mean()),
            "transfer_frac": float(d[:P + R, XFER_NS].mean()),
            "h2d_mb_per_s": float(delta[:P + R, H2D_BYTES].sum()) / 1e6 / seconds,
            "return_mean": self.return_mean(),
        }

    def drop_shared(self):
        for q in self.queues:
            q.cancel_join_thread()
            q.close()
        for conn in self.conns:
            conn.close()
        self.queues, self.conns = [], []
        self.pred_q = self.train_q = None

    def close(self):
        self.closing.set()
        if hasattr(self, "buf"):
            self.buf["stop"][0] = 1
        for thread in self.threads:
            thread.join(JOIN_S)
        self.threads = []
        self.end_workers()


@register
class GA3C(Adapter):
    name = "ga3c"
    kind = "learner"
    description = ("GA3C: agent processes queue prediction requests and experiences; predictor threads batch "
                   "the requests into one forward pass, trainer threads batch experiences into A2C updates")
    requires = ("gymnasium", "torch")
    options = (
        Option("agents", int, 2, "agent processes; each steps num_envs / agents envs", low=1),
        Option("predictors", int, 1, "predictor threads in the learner process", low=1),
        Option("trainers", int, 1, "trainer threads in the learner process (updates are serialised)", low=1),
        Option("predict_batch", int, 128, "prediction requests (one agent's envs each) per forward pass, at most",
               low=1),
        Option("predict_wait_ms", float, 0.0, "how long a predictor waits for more requests than are queued "
               "(0: only what is queued, as GA3C)"),
        Option("train_batch", int, 4, "experiences (t_max steps of one agent's envs) per update, at most", low=1),
        Option("t_max", int, 5, "steps per experience (n-step returns)", low=1),
        Option("max_queue", int, 100, "experiences the training queue holds; agents block beyond", low=1),
        Option("lr", float, 2e-3, "Adam learning rate", low=0, open_low=True),
        Option("max_grad_norm", float, 0.5, "clip the gradient to this global norm (0: no clipping)"),
        Option("worker_affinity", str, "none", "pin agent i to the i-th allowed CPU (spread) or not",
               ("none", "spread")),
        CONTEXT_OPTION,
    )

    def supports(self, workload, options):
        return learner_reason(self.name, workload, lambda w: learner_supports(self.name, w, options, per="agents"))

    def open(self, workload, options):
        return GA3CSession(workload, options)
