"""`pufferlib-serial` and `pufferlib-mp`: PufferLib 3's vectorization, called as its users call it
(`pufferlib.vector.make` over GymnasiumPufferEnv, then `send` / `recv` of a batch), in its own environment
(adapters/envs/pufferlib.txt). A finished env resets on the following send, which is no transition and is not
counted. How it is driven: docs/strategies/stepping.md, "How the PufferLib adapters are built".
"""
from adapters._kit.batch import ARRAY_SPACES
from adapters._kit.nets import policy_params
from rlbench.api import (
    Adapter,
    Option,
    Unsupported,
    env_call,
    make_env,
    make_policy,
    register,
    unsupported_leaves,
    unsupported_spaces,
)

OBS = ("Box", "Discrete", "MultiDiscrete", "MultiBinary", "Dict", "Tuple")   # what its emulation flattens
ACT = ("Box", "Discrete", "MultiDiscrete")


def physical_cores() -> int:
    import psutil
    return psutil.cpu_count(logical=False) or 1


def layout(num_envs: int, options: dict):
    """(num_workers, batch_size) as PufferLib's Multiprocessing will take them, or why it would refuse."""
    workers = options["num_workers"] or max(w for w in range(1, min(num_envs, physical_cores()) + 1)
                                            if num_envs % w == 0)
    batch = options["batch_size"] or num_envs
    if num_envs % workers:
        return f"num_envs={num_envs} must be a multiple of num_workers={workers}"
    if batch > num_envs or batch % (num_envs // workers):
        return (f"batch_size={batch} must be at most num_envs={num_envs} and a multiple of the envs per worker "
                f"({num_envs // workers})")
    if options["zero_copy"] and num_envs % batch:
        return f"zero_copy: num_envs={num_envs} must be a multiple of batch_size={batch}"
    if workers > physical_cores() and not options["overwork"]:
        return (f"num_workers={workers} > {physical_cores()} physical cores: PufferLib refuses it without "
                "overwork=true")
    return workers, batch


class PufferSession:
    def __init__(self, workload, backend: str, kwargs: dict):
        from functools import partial

        import numpy as np
        import pufferlib.emulation
        import pufferlib.vector
        self.np = np
        self.vec = pufferlib.vector.make(
            pufferlib.emulation.GymnasiumPufferEnv,
            env_kwargs={"env_creator": partial(make_env, workload.env_id, **workload.env_kwargs)},
            backend=getattr(pufferlib.vector, backend), num_envs=workload.num_envs, seed=workload.seed, **kwargs)
        try:
            self.vec.async_reset(workload.seed)
            self.obs, _, term, trunc, _, _, self.env_ids, _ = self.vec.recv()
            self.resetting = np.logical_or(term, trunc)
            space, self.view = self._observations(workload)
            self.policy = make_policy(workload, space, self.vec.single_action_space, batch_size=len(self.obs))
            if self.policy.recurrent:
                # per env id: does its next observation start an episode? Its first does; after a done, the
                # next send resets it and the recv after that gives the new episode's first observation
                self.next_starts = np.ones(workload.num_envs, dtype=np.bool_)
                self._track_starts()
                self.step = self._step_recurrent
        except BaseException:
            self.vec.close()
            raise
        self.info = {"workers": kwargs.get("num_workers", 1), "batch_size": len(self.obs)}

    def _observations(self, workload):
        """The observation space a policy is built for and how a batch reaches it. PufferLib's emulation hands a
        Dict or Tuple observation over as the bytes of one structured record per env; a network of rlbench's
        (mlp, cnn, cnn:impala, lstm) gets it back as the env's own Dict or Tuple, a batch per part (the same
        inputs as under every other strategy: a CNN per image entry needs the images); any other policy the
        bytes, as PufferLib's users get them."""
        driver = self.vec.driver_env
        native = driver.env.observation_space
        emulated = getattr(driver, "is_obs_emulated", False)
        if not emulated or not policy_params(workload.policy, native, self.vec.single_action_space):
            return self.vec.single_observation_space, lambda obs: obs
        record, np = driver.obs_dtype, self.np

        def parts(struct, space):
            kind = type(space).__name__
            if kind == "Dict":
                return {key: parts(struct[key], part) for key, part in space.spaces.items()}
            if kind == "Tuple":
                return tuple(parts(struct[f"f{i}"], part) for i, part in enumerate(space.spaces))
            return np.ascontiguousarray(struct)   # a field of the records: strided, copied out

        return native, lambda obs: parts(np.ascontiguousarray(obs).view(record)[:, 0], native)

    def step(self) -> int:
        made = len(self.obs) - int(self.np.count_nonzero(self.resetting))  # envs reset by this send: no step
        self.vec.send(self.policy(self.view(self.obs)))
        self.obs, _, term, trunc, *_ = self.vec.recv()
        self.resetting = self.np.logical_or(term, trunc)
        return made

    def _step_recurrent(self) -> int:
        """A batch of any envs (an async recv): the policy is told their ids and which start an episode."""
        made = len(self.obs) - int(self.np.count_nonzero(self.resetting))
        self.vec.send(self.policy(self.view(self.obs), self.starts, self.env_ids))
        self.obs, _, term, trunc, _, _, self.env_ids, _ = self.vec.recv()
        self.resetting = self.np.logical_or(term, trunc)
        self._track_starts()
        return made

    def _track_starts(self):
        self.starts = self.next_starts[self.env_ids]
        self.next_starts[self.env_ids] = self.resetting

    def close(self):
        self.vec.close()


class _Puffer(Adapter):
    kind = "vector_env"
    requires = ("pufferlib",)
    environment = "pufferlib"   # adapters/envs/pufferlib.txt: pufferlib-core without its torch pin

    def supports(self, workload, options):
        """Its emulation flattens every observation part into one structured numpy record: arrays only."""
        return (unsupported_spaces(workload, self.name, obs=OBS, act=ACT)
                or unsupported_leaves(workload, self.name, carries=ARRAY_SPACES))


@register
class PufferSerial(_Puffer):
    name = "pufferlib-serial"
    description = "pufferlib.vector.make(backend=Serial): PufferLib's emulated envs stepped in this process"

    def open(self, workload, options):
        return PufferSession(workload, "Serial", {})

    def snippet(self, workload, options):
        return ("pufferlib.vector.make(pufferlib.emulation.GymnasiumPufferEnv, env_kwargs={'env_creator': "
                f"lambda: {env_call(workload)}}}, backend=pufferlib.vector.Serial, num_envs={workload.num_envs})")


@register
class PufferMultiprocessing(_Puffer):
    name = "pufferlib-mp"
    description = ("pufferlib.vector.make(backend=Multiprocessing): worker processes step envs into shared "
                   "memory, busy-waiting; recv() a batch, sync or async")
    options = (
        Option("num_workers", int, 0, "worker processes; 0 = the largest divisor of num_envs up to the physical "
                                      "cores"),
        Option("batch_size", int, 0, "envs per recv(); 0 = num_envs (synchronous); smaller: the first workers done"),
        Option("zero_copy", bool, True, "batches are contiguous blocks of workers, read in place"),
        Option("overwork", bool, False, "allow more workers than physical cores (PufferLib refuses it otherwise)"),
    )

    def supports(self, workload, options):
        fit = layout(workload.num_envs, options)
        return fit if isinstance(fit, str) else super().supports(workload, options)

    def open(self, workload, options):
        fit = layout(workload.num_envs, options)
        if isinstance(fit, str):
            raise Unsupported(fit)
        workers, batch = fit
        return PufferSession(workload, "Multiprocessing", {"num_workers": workers, "batch_size": batch,
                                                           "zero_copy": options["zero_copy"],
                                                           "overwork": options["overwork"]})

    def tune_space(self, num_envs, cpus):
        """Workers: as many as divide the envs up to the cores, and one; batches: all envs (sync) and half
        (async), as PufferLib's own autotune tries them."""
        cores = min(cpus, physical_cores())
        workers = sorted({max(w for w in range(1, min(num_envs, cores) + 1) if num_envs % w == 0), 1})
        out = []
        for w in workers:
            for batch in sorted({num_envs, num_envs // 2}, reverse=True):
                opts = {"num_workers": w, "batch_size": batch}
                if batch and not isinstance(layout(num_envs, {**self.resolve_options({}), **opts}), str):
                    out.append(opts)
        return out or [{}]

    def snippet(self, workload, options):
        fit = layout(workload.num_envs, options)
        workers, batch = fit if not isinstance(fit, str) else (options["num_workers"], options["batch_size"])
        return ("pufferlib.vector.make(pufferlib.emulation.GymnasiumPufferEnv, env_kwargs={'env_creator': "
                f"lambda: {env_call(workload)}}}, backend=pufferlib.vector.Multiprocessing, "
                f"num_envs={workload.num_envs}, num_workers={workers}, batch_size={batch}, "
                f"zero_copy={options['zero_copy']}, overwork={options['overwork']})")
