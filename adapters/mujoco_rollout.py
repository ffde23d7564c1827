"""`mujoco-rollout`: MuJoCo's own batched stepper, `mujoco.rollout`, over num_envs copies of a gymnasium MuJoCo env.

Physics stepping, not a vector env: no gymnasium wrapper or reward, but gymnasium's observation, Ant's termination,
the time limit and its reset. One unit is one call of `chunk` env steps of every env (chunk 1: like-for-like).
How it is built and counted: docs/strategies/stepping.md, "How the mujoco-rollout adapter is built".
"""
import os

from adapters._kit.mujoco_envs import ENVS, episode_ends, gymnasium_model, reset_noise
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
        self.np, spec = np, ENVS[workload.env_id]
        self.model, frameskip, obs_space, action_space = gymnasium_model(workload)
        self.policy = make_policy(workload, obs_space, action_space)
        m, n = self.model, workload.num_envs
        self.n, self.chunk, self.frameskip = n, options["chunk"], frameskip
        self.nq, self.nv = m.nq, m.nv
        self.physics = mujoco.mjtState.mjSTATE_FULLPHYSICS.value   # time, qpos, qvel, act, ...: what rollout carries
        self.ctrl_spec = mujoco.mjtState.mjSTATE_CTRL.value        # control rows are data.ctrl, as do_simulation sets
        fresh = mujoco.MjData(m)                                   # as mj_resetData leaves it: qpos0, zeros
        self.reset_state = np.empty(mujoco.mj_stateSize(m, self.physics))
        mujoco.mj_getState(m, fresh, self.reset_state, self.physics)
        self.obs_slice = slice(1 + spec["obs_skip_qpos"], 1 + m.nq + m.nv)  # state = [time, qpos, qvel, ...]
        self.env_id = workload.env_id
        self.rngs = [np.random.default_rng(workload.seed + i) for i in range(n)]  # gymnasium's reset(seed=) rng
        self.state = np.stack([self._reset_state(i) for i in range(n)])
        self.elapsed_steps = np.zeros(n, dtype=np.int64)
        nstep = self.chunk * frameskip
        self.control = np.zeros((n, nstep, m.nu))
        self.trajectory = np.empty((n, nstep, self.state.shape[1]))
        self.sensordata = np.empty((n, nstep, m.nsensordata))
        self.models = [m] * n
        self.threads = thread_count(workload, options)
        # one thread is the calling thread (nthread=0: no pool), as mujoco.rollout.rollout runs one MjData
        self.rollout = rollout.Rollout(nthread=self.threads if self.threads > 1 else 0)
        self.datas = [mujoco.MjData(m) for _ in range(self.threads)]
        self.obs = self.state[:, self.obs_slice].copy()
        self.recurrent = self.policy.recurrent
        self.starts = np.ones(n, dtype=np.bool_)   # a recurrent policy's episode starts: the envs reset last call
        self.info = {"workers": self.threads, "batch_size": n}

    def _reset_state(self, i):
        """gymnasium's reset_model: the same draws in the same order from env i's generator."""
        state = self.reset_state.copy()
        dqpos, qvel = reset_noise(self.rngs[i], self.nq, self.nv)
        state[1:1 + self.nq] += dqpos
        state[1 + self.nq:1 + self.nq + self.nv] += qvel
        return state

    def step(self) -> int:
        np = self.np
        acted = self.policy(self.obs, self.starts) if self.recurrent else self.policy(self.obs)
        actions = np.asarray(acted, dtype=np.float64)
        self.control[:] = actions[:, None, :]            # held for chunk x frameskip physics steps
        self.rollout.rollout(self.models, self.datas, self.state, self.control, control_spec=self.ctrl_spec,
                             skip_checks=True, nstep=self.chunk * self.frameskip, state=self.trajectory,
                             sensordata=self.sensordata)
        env_steps = self.trajectory[:, self.frameskip - 1::self.frameskip]     # (n, chunk, nstate)
        done = episode_ends(np, self.env_id, self.elapsed_steps[:, None] + np.arange(1, self.chunk + 1),
                            env_steps[:, :, 1:1 + self.nq], env_steps[:, :, 1 + self.nq:1 + self.nq + self.nv])
        ended = done.any(axis=1)
        made = np.where(ended, done.argmax(axis=1) + 1, self.chunk)
        self.state[:] = self.trajectory[:, -1]
        self.elapsed_steps += self.chunk
        for i in np.flatnonzero(ended):
            self.state[i] = self._reset_state(i)
            self.elapsed_steps[i] = 0
        self.obs = self.state[:, self.obs_slice].copy()
        self.starts = ended
        return int(made.sum())

    def close(self):
        self.rollout.close()


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
        """The pool on every core the cell has, half of them, and the calling thread alone."""
        full = min(num_envs, cpus)
        return [{"num_threads": t} for t in sorted({1, max(1, full // 2), full})]

    def snippet(self, workload, options):
        threads = thread_count(workload, options)
        nstep = options["chunk"] * env_info(workload.env_id).frameskip
        return (f"model = gymnasium.make({workload.env_id!r}).unwrapped.model; "
                f"pool = mujoco.rollout.Rollout(nthread={threads if threads > 1 else 0}); "
                f"state, _ = pool.rollout([model] * {workload.num_envs}, "
                f"[mujoco.MjData(model) for _ in range({threads})], initial_state, control, nstep={nstep})"
                f"  # per call; the policy sets control, held for {options['chunk']} env step(s)")
