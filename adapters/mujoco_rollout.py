"""`mujoco-rollout`: MuJoCo's own batched stepper, `mujoco.rollout`, over num_envs copies of a gymnasium MuJoCo env.

Physics stepping, not a vector env: no gymnasium wrapper or reward, but gymnasium's observation, its termination,
the time limit and its reset. One unit is one call of `chunk` env steps of every env (chunk 1: like-for-like).
Humanoid's observation adds MjData fields (cinert, cvel, qfrc_actuator, cfrc_ext) of the last physics step, which
rollout does not return: there the last physics step of each unit is taken by mj_step on the pool's threads.
How it is built and counted: docs/strategies/stepping.md, "How the mujoco-rollout adapter is built".
"""
import os
from concurrent.futures import ThreadPoolExecutor

from adapters._kit.mujoco_envs import (
    ENVS,
    SOLVERS,
    episode_ends,
    field_sizes,
    gymnasium_model,
    observation,
    reset_noise,
    set_solver,
    solver_settings,
)
from rlbench.api import Adapter, Option, env_info, make_policy, register


def cores() -> int:
    """The CPUs this cell may run on (its affinity), which num_threads=0 fills."""
    return len(os.sched_getaffinity(0))


def thread_count(workload, options) -> int:
    return options["num_threads"] or min(workload.num_envs, cores())


class MujocoRolloutSession:
    def __init__(self, workload, options):
        import mujoco
        import numpy as np
        from mujoco import rollout
        self.np, self.mujoco = np, mujoco
        self.model, frameskip, obs_space, action_space = gymnasium_model(workload)
        replaced = set_solver(self.model, options["solver"], "mujoco-rollout")
        self.policy = make_policy(workload, obs_space, action_space)
        m, n = self.model, workload.num_envs
        self.n, self.chunk, self.frameskip = n, options["chunk"], frameskip
        self.nq, self.nv = m.nq, m.nv
        self.physics = mujoco.mjtState.mjSTATE_FULLPHYSICS.value   # time, qpos, qvel, act, ...: what rollout carries
        self.ctrl_spec = mujoco.mjtState.mjSTATE_CTRL.value        # control rows are data.ctrl, as do_simulation sets
        fresh = mujoco.MjData(m)                                   # as mj_resetData leaves it: qpos0, zeros
        self.reset_state = np.empty(mujoco.mj_stateSize(m, self.physics))
        mujoco.mj_getState(m, fresh, self.reset_state, self.physics)
        self.qpos, self.qvel = slice(1, 1 + m.nq), slice(1 + m.nq, 1 + m.nq + m.nv)  # state = [time, qpos, ...]
        self.env_id = workload.env_id
        self.fields = field_sizes(m, workload.env_id)   # Humanoid's: the last physics step taken by mj_step
        self.rngs = [np.random.default_rng(workload.seed + i) for i in range(n)]  # gymnasium's reset(seed=) rng
        self.state = np.stack([self._reset_state(i) for i in range(n)])
        self.elapsed_steps = np.zeros(n, dtype=np.int64)
        self.nstep = self.chunk * frameskip
        rolled = self.nstep - 1 if self.fields else self.nstep
        self.control = np.zeros((n, rolled, m.nu))
        self.trajectory = np.empty((n, rolled, self.state.shape[1]))
        self.sensordata = np.empty((n, rolled, m.nsensordata))
        self.models = [m] * n
        self.threads = thread_count(workload, options)
        # one thread is the calling thread (nthread=0: no pool), as mujoco.rollout.rollout runs one MjData
        self.rollout = rollout.Rollout(nthread=self.threads if self.threads > 1 else 0)
        self.datas = [mujoco.MjData(m) for _ in range(self.threads)]
        self.field_rows = {}
        if self.fields:
            self.last = np.empty_like(self.state)
            self.field_rows = {k: np.empty((n, size)) for k, size in self.fields.items()}
            self.pool = ThreadPoolExecutor(self.threads) if self.threads > 1 else None
            self._last_steps(None, None, np.ones(n, dtype=np.bool_))   # every env's reset fields
        self.obs = self._observe()
        self.recurrent = self.policy.recurrent
        self.starts = np.ones(n, dtype=np.bool_)   # a recurrent policy's episode starts: the envs reset last call
        self.info = {"workers": self.threads, "batch_size": n,
                     "device_settings": {"physics": {**solver_settings(m), "frame_skip": frameskip,
                                                     "precision": "float64", **replaced}}}

    def _reset_state(self, i):
        """gymnasium's reset_model: the same draws in the same order from env i's generator."""
        state = self.reset_state.copy()
        dqpos, qvel = reset_noise(self.rngs[i], self.nq, self.nv, self.env_id)
        state[1:1 + self.nq] += dqpos
        state[1 + self.nq:1 + self.nq + self.nv] += qvel
        return state

    def _observe(self):
        np = self.np
        qpos, qvel = self.state[:, self.qpos], self.state[:, self.qvel]
        return observation(np, self.env_id, qpos, qvel, self.field_rows)

    def _last_steps(self, start, actions, ended):
        """Each env's last physics step of the unit by mj_step from `start` under `actions` (into self.last),
        then mj_rnePostConstraint, as gymnasium's do_simulation; or (start None) the fields of gymnasium's reset
        for the `ended` envs: mj_forward at the reset state, zero control, cfrc_ext zeros. Env i on data
        i % threads, the warm start zeroed, so the states do not depend on the thread count."""
        mujoco, m, threads = self.mujoco, self.model, self.threads

        def envs(j):
            d = self.datas[j]
            for i in range(j, self.n, threads):
                if start is None:
                    if not ended[i]:
                        continue
                    mujoco.mj_setState(m, d, self.state[i], self.physics)
                    d.ctrl[:] = 0
                    mujoco.mj_forward(m, d)
                    d.cfrc_ext[:] = 0
                else:
                    mujoco.mj_setState(m, d, start[i], self.physics)
                    d.ctrl[:] = actions[i]
                    d.qacc_warmstart[:] = 0
                    mujoco.mj_step(m, d)
                    mujoco.mj_rnePostConstraint(m, d)
                    mujoco.mj_getState(m, d, self.last[i], self.physics)
                for name, rows in self.field_rows.items():
                    rows[i] = getattr(d, name).reshape(-1)
        if self.pool is None:
            envs(0)
        else:
            list(self.pool.map(envs, range(threads)))

    def step(self) -> int:
        np = self.np
        acted = self.policy(self.obs, self.starts) if self.recurrent else self.policy(self.obs)
        actions = np.asarray(acted, dtype=np.float64)
        self.control[:] = actions[:, None, :]            # held for chunk x frameskip physics steps
        if self.trajectory.shape[1]:
            self.rollout.rollout(self.models, self.datas, self.state, self.control, control_spec=self.ctrl_spec,
                                 skip_checks=True, nstep=self.trajectory.shape[1], state=self.trajectory,
                                 sensordata=self.sensordata)
        env_steps = self.trajectory[:, self.frameskip - 1::self.frameskip]     # (n, chunk, nstate)
        if self.fields:
            start = self.trajectory[:, -1] if self.trajectory.shape[1] else self.state
            self._last_steps(start, actions, None)
            env_steps = np.concatenate([env_steps, self.last[:, None]], axis=1)
        done = episode_ends(np, self.env_id, self.elapsed_steps[:, None] + np.arange(1, self.chunk + 1),
                            env_steps[:, :, self.qpos], env_steps[:, :, self.qvel])
        ended = done.any(axis=1)
        made = np.where(ended, done.argmax(axis=1) + 1, self.chunk)
        self.state[:] = env_steps[:, -1]
        self.elapsed_steps += self.chunk
        for i in np.flatnonzero(ended):
            self.state[i] = self._reset_state(i)
            self.elapsed_steps[i] = 0
        if self.fields and ended.any():
            self._last_steps(None, None, ended)      # the reset envs' fields (the others' stay)
        self.obs = self._observe()
        self.starts = ended
        return int(made.sum())

    def close(self):
        self.rollout.close()
        if self.fields and self.pool is not None:
            self.pool.shutdown()


@register
class MujocoRollout(Adapter):
    name = "mujoco-rollout"
    kind = "vector_env"
    description = ("mujoco.rollout.Rollout(nthread) over num_envs MjData states of the gymnasium env's own model: "
                   "physics stepping in C++, no gymnasium wrappers, no reward; chunk env steps per call, the "
                   "policy once per chunk")
    requires = ("mujoco", "gymnasium")
    options = (
        Option("num_threads", int, 0, "Rollout thread pool size (one MjData each); 0 = min(num_envs, the cell's "
                                      "CPUs); 1 = the calling thread, no pool"),
        Option("chunk", int, 1, "env steps per rollout call (one unit), the policy's actions held for all of them; "
                                "1 = a policy call per env step, as the gymnasium and EnvPool cells", low=1),
        Option("solver", str, "model", "constraint solver: model = the model's own (Humanoid-v4: PGS), or "
                                       "newton / cg / pgs in its place (to match mjx or mujoco-warp)",
               choices=SOLVERS),
    )

    def supports(self, workload, options):
        if workload.env_id not in ENVS:
            return f"mujoco-rollout runs gymnasium's MuJoCo envs only ({', '.join(ENVS)}), not {workload.env_id}"
        if options["num_threads"] > workload.num_envs:
            return (f"num_threads={options['num_threads']} > num_envs={workload.num_envs}: mujoco.rollout hands "
                    "each thread whole envs, so a thread would idle")
        return None

    def open(self, workload, options):
        return MujocoRolloutSession(workload, options)

    def tune_space(self, num_envs, cpus):
        """The pool on every core the cell has (its default, so a tune's probe starts there), half of them, and
        the calling thread alone."""
        full = min(num_envs, cpus)
        return [{"num_threads": t} for t in sorted({1, max(1, full // 2), full}, reverse=True)]

    def snippet(self, workload, options):
        threads = thread_count(workload, options)
        nstep = options["chunk"] * env_info(workload.env_id).frameskip
        return (f"model = gymnasium.make({workload.env_id!r}).unwrapped.model; "
                f"pool = mujoco.rollout.Rollout(nthread={threads if threads > 1 else 0}); "
                f"state, _ = pool.rollout([model] * {workload.num_envs}, "
                f"[mujoco.MjData(model) for _ in range({threads})], initial_state, control, nstep={nstep})"
                f"  # per call; the policy sets control, held for {options['chunk']} env step(s)")
