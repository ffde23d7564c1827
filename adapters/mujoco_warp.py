"""`mujoco-warp`: MuJoCo Warp (mujoco_warp on NVIDIA Warp) stepping gymnasium's own MuJoCo model of an env in
num_envs worlds of one batched Data: GPU physics beside mjx's, mujoco-rollout's and EnvPool's on the same file.

Physics stepping, not a vector env, as mujoco-rollout: one unit is one env step of every world (frame skip
mjw.step calls), the project's policy once per unit on gymnasium's observation (qpos without the leading entries
it leaves out, qvel, Humanoid's MjData fields), its termination, the time limit and gymnasium's reset (each env's
own generator), the ended worlds reset in the unit that ended them. The policy sees host arrays: on a GPU the
observation crosses to the host and the actions back each unit, inside the measured step (docs/strategies/jax.md).
Warp keeps the model's solver (Newton in place of PGS, which it lacks: Humanoid-v4) and iterations in float32;
Warp compiles its kernels on first use into its kernel cache ($WARP_CACHE_PATH, else Warp's default): compile_s is
that first step, and a warm cache makes it a load. On a CPU, Warp runs each kernel on one thread: the CPU path
checks the physics, the GPU path is the one to time.
"""
import time

from adapters._kit.mujoco_envs import (
    ENVS,
    GPU_SOLVERS,
    episode_ends,
    gaps_to_cpu,
    gymnasium_model,
    observation,
    reset_noise,
    set_solver,
    solver_settings,
)
from rlbench.api import Adapter, Option, Unsupported, env_info, make_policy, register


def start_warp(device: str):
    """Warp, set to print warnings only (no banner, no line per kernel loaded), and the device the cell runs on;
    before mujoco_warp is imported, since importing it starts Warp."""
    import warp as wp
    wp.config.log_level = wp.LOG_WARNING
    wp.init()
    if device == "auto":
        device = "cuda" if wp.is_cuda_available() else "cpu"
    if device == "cuda" and not wp.is_cuda_available():
        raise Unsupported("no CUDA device: device=cuda, and Warp finds none (valid here: auto, cpu)")
    return wp, wp.get_device(device)


def physics_settings(model, frameskip, data, replaced) -> dict:
    """What the row records of the physics it stepped: the model's options as MuJoCo Warp keeps them, and the
    contact and constraint buffers it was given per world."""
    return {**solver_settings(model), "frame_skip": frameskip, "precision": "float32", "impl": "warp",
            "nconmax": int(data.naconmax // data.nworld), "njmax": int(data.njmax), **replaced}


class MujocoWarpSession:
    def __init__(self, workload, options):
        wp, device = start_warp(options["device"])
        import mujoco
        import mujoco_warp as mjw
        import numpy as np
        self.np, self.mjw, self.env_id = np, mjw, workload.env_id
        self.wp, self.device = wp, device
        model, self.frameskip, obs_space, action_space = gymnasium_model(workload)
        replaced = set_solver(model, options["solver"], "mujoco-warp", GPU_SOLVERS)
        self.fields = ENVS[workload.env_id]["obs_fields"]
        self.policy = make_policy(workload, obs_space, action_space)
        n, self.n, self.nq, self.nv = workload.num_envs, workload.num_envs, model.nq, model.nv
        fresh = mujoco.MjData(model)                 # as mj_resetData leaves it: qpos0, zeros
        self.qpos0 = fresh.qpos.copy()
        sizes = {k: options[k] for k in ("nconmax", "njmax") if options[k]}
        with wp.ScopedDevice(device):
            self.m = mjw.put_model(model)
            self.d = mjw.put_data(model, fresh, nworld=n, **sizes)
            self.rngs = [np.random.default_rng(workload.seed + i) for i in range(n)]  # gymnasium's reset(seed=)
            t0 = time.perf_counter()
            self._advance()                          # compiles (or loads from the cache) every kernel it runs
            wp.synchronize_device(device)
            compile_s = time.perf_counter() - t0
            self.graph = None
            if options["graph"] and device.is_cuda:  # the frame skip's steps as one CUDA graph launch
                with wp.ScopedCapture(device) as capture:
                    self._advance()
                self.graph = capture.graph
            self._reset(np.ones(n, dtype=np.bool_))   # the warm-up's steps undone: every world starts fresh
        self.elapsed_steps = np.zeros(n, dtype=np.int64)
        self.starts = np.ones(n, dtype=np.bool_)     # a recurrent policy's episode starts: the envs reset last unit
        fields = self._fields()
        if "cfrc_ext" in fields:                     # gymnasium's reset leaves it zero
            fields["cfrc_ext"][:] = 0
        self.obs = self._observe(self.d.qpos.numpy(), self.d.qvel.numpy(), fields)
        self.info = {"compile_s": compile_s, "device": "cuda" if device.is_cuda else "cpu", "workers": 1,
                     "batch_size": n,
                     "device_settings": {"device": str(device), "warp": wp.__version__,
                                         "mujoco_warp": mjw.__version__, "cuda_graph": self.graph is not None,
                                         "kernel_cache": wp.config.kernel_cache_dir,
                                         "physics": physics_settings(model, self.frameskip, self.d, replaced)}}

    def _advance(self):
        """do_simulation: frame skip mjw.step calls (then mj_rnePostConstraint, where cfrc_ext is observed)."""
        for _ in range(self.frameskip):
            self.mjw.step(self.m, self.d)
        if "cfrc_ext" in self.fields:
            self.mjw.rne_postconstraint(self.m, self.d)

    def _fields(self) -> dict:
        return {name: getattr(self.d, name).numpy() for name in self.fields}

    def _reset(self, ended):
        """gymnasium's reset of the ended worlds: mj_resetData (MuJoCo Warp's, by world), then qpos0 and zero
        velocity plus each env's own draws; where the observation reads MjData fields, mj_forward (set_state's)
        of every world, whose fields the caller reads for the ended worlds only (a forward leaves the warm start
        and the state alone, so the other worlds step on as before)."""
        np = self.np
        self.mjw.reset_data(self.m, self.d, reset=self.wp.array(ended, dtype=bool, device=self.device))
        qpos, qvel = self.d.qpos.numpy(), self.d.qvel.numpy()
        for i in np.flatnonzero(ended):
            dqpos, qvel[i] = reset_noise(self.rngs[i], self.nq, self.nv, self.env_id)
            qpos[i] = self.qpos0 + dqpos
        self.d.qpos.assign(qpos)
        self.d.qvel.assign(qvel)
        if self.fields:
            self.mjw.forward(self.m, self.d)

    def _observe(self, qpos, qvel, fields):
        return observation(self.np, self.env_id, qpos, qvel, fields)

    def step(self) -> int:
        np = self.np
        acted = self.policy(self.obs, self.starts) if self.policy.recurrent else self.policy(self.obs)
        self.d.ctrl.assign(np.asarray(acted, dtype=np.float32))
        if self.graph is not None:
            self.wp.capture_launch(self.graph)
        else:
            self._advance()
        qpos, qvel = self.d.qpos.numpy(), self.d.qvel.numpy()      # waits for the device: the time is real
        fields = self._fields()
        overflow = self.d.overflow.numpy()
        if overflow.any():
            bits = int(np.bitwise_or.reduce(overflow))
            raise RuntimeError(f"MuJoCo Warp overflowed its buffers (mjw.OverflowType bits {bits}): raise "
                               "--opt nconmax= / njmax= (per world)")
        self.elapsed_steps += 1
        ended = episode_ends(np, self.env_id, self.elapsed_steps, qpos, qvel)
        if ended.any():
            self._reset(ended)
            self.elapsed_steps[ended] = 0
            qpos, qvel = self.d.qpos.numpy(), self.d.qvel.numpy()
            for name, reset in self._fields().items():      # gymnasium's reset: cfrc_ext zero
                fields[name][ended] = 0 if name == "cfrc_ext" else reset[ended]
        self.obs = self._observe(qpos, qvel, fields)
        self.starts = ended
        return self.n

    def close(self):
        self.graph = None
        self.d = self.m = None


@register
class MujocoWarp(Adapter):
    name = "mujoco-warp"
    kind = "vector_env"
    description = ("MuJoCo Warp: gymnasium's MuJoCo model as num_envs worlds of one batched mjw.Data, frame skip "
                   "mjw.step calls per env step (one CUDA graph on a GPU), gymnasium's termination and reset by "
                   "world, the policy on host arrays once per env step")
    requires = ("mujoco_warp", "warp", "mujoco", "gymnasium")
    options = (
        Option("device", str, "auto", "Warp device: auto = CUDA when Warp finds one, else the CPU (one thread per "
                                      "kernel: a physics check, not a speed)", choices=("auto", "cpu", "cuda")),
        Option("graph", bool, True, "on CUDA, capture the frame skip's mjw.step calls as one graph (as "
                                    "mjwarp-testspeed does); ignored on the CPU"),
        Option("nconmax", int, 0, "contacts allocated per world; 0 = MuJoCo Warp's default for the model", low=0),
        Option("njmax", int, 0, "constraint rows allocated per world; 0 = MuJoCo Warp's default", low=0),
        Option("solver", str, "model", "constraint solver: model = the model's own, Newton where that is PGS "
                                       "(MuJoCo Warp has none: Humanoid-v4), or newton / cg", choices=GPU_SOLVERS),
    )

    def supports(self, workload, options):
        if workload.env_id not in ENVS:
            return f"mujoco-warp steps gymnasium's MuJoCo models of {', '.join(ENVS)}, not {workload.env_id}"
        if workload.env_kwargs:
            return f"mujoco-warp takes no env_kwargs (got {', '.join(workload.env_kwargs)})"
        return None

    def open(self, workload, options):
        return MujocoWarpSession(workload, options)

    def snippet(self, workload, options):
        skip = env_info(workload.env_id).frameskip
        return (f"model = gymnasium.make({workload.env_id!r}).unwrapped.model; m = mujoco_warp.put_model(model); "
                f"d = mujoco_warp.put_data(model, mujoco.MjData(model), nworld={workload.num_envs}); "
                f"d.ctrl.assign(actions); [mujoco_warp.step(m, d) for _ in range({skip})]  # per env step")


def states_gap(env_id: str = "Ant-v4", steps: int = 20, seed: int = 0, cone: str = "model",
               solver: str = "model") -> list:
    """MuJoCo Warp (float32, one world, on the CPU) against CPU MuJoCo, from gymnasium's reset state under one
    random action sequence (adapters._kit.mujoco_envs.gaps_to_cpu): tests/frameworks/test_mujoco_warp.py."""
    wp, device = start_warp("cpu")
    import mujoco
    import mujoco_warp as mjw
    import numpy as np

    def start(model, frameskip, rng):
        fresh = mujoco.MjData(model)
        dqpos, fresh.qvel[:] = reset_noise(rng, model.nq, model.nv, env_id)
        fresh.qpos[:] += dqpos
        fields = ENVS[env_id]["obs_fields"]
        with wp.ScopedDevice(device):
            m, d = mjw.put_model(model), mjw.put_data(model, fresh, nworld=1)

        def advance(action):
            with wp.ScopedDevice(device):
                d.ctrl.assign(action[None])
                for _ in range(frameskip):
                    mjw.step(m, d)
                if fields:
                    mjw.rne_postconstraint(m, d)
            qpos, qvel = d.qpos.numpy(), d.qvel.numpy()
            return qpos[0], qvel[0], observation(np, env_id, qpos, qvel, {k: getattr(d, k).numpy() for k in fields})[0]
        return fresh.qpos.copy(), fresh.qvel.copy(), advance
    return gaps_to_cpu(env_id, steps, seed, cone, start, solver, GPU_SOLVERS)
