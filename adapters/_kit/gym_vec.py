"""gymnasium's SyncVectorEnv and AsyncVectorEnv as sessions, and closing one that a failure left half-way.

`GymSync` and `GymAsync` are the bodies of the adapters `gymnasium-sync` / `gymnasium-async` (the main
environment's gymnasium, adapters/gymnasium_vector.py) and `gymnasium14-sync` / `gymnasium14-async` (gymnasium
1.4 in its own environment, adapters/gymnasium14_vector.py): each module registers thin subclasses that name them.
Both reset a finished env within the same step (AutoresetMode.SAME_STEP), as `serial` does, so every adapter
counts the same transitions.

AsyncVectorEnv.close() first waits for the call in flight, even with terminate=True: when that call failed
part-way through (a worker died, an interrupt), it reads again the pipes read before the failure (and waits
forever) or the dead worker's (and raises), and the live workers are left running either way. Our sessions only
close between calls, so a call still in flight, or a worker found dead, means a failure: the workers are then
ended here, without that wait.
"""

import numpy as np

from adapters._kit.batch import for_vector_env
from adapters._kit.procs import CONTEXT_OPTION, stop_processes
from rlbench.api import Adapter, Option, env_call, env_fns, env_info, make_policy, spaces

TERM_WAIT_S = 5.0   # how long a worker may outlive SIGTERM before it gets SIGKILL


def close_vector(envs) -> None:
    """Close a SyncVectorEnv or AsyncVectorEnv, whatever state a failure left it in."""
    workers = [p for p in getattr(envs, "processes", ()) if p is not None]   # AsyncVectorEnv's
    if not workers:
        envs.close()
        return
    from gymnasium.vector.async_vector_env import AsyncState
    if envs._state is not AsyncState.DEFAULT or any(not p.is_alive() for p in workers):
        _end(envs, workers)
        return
    try:
        envs.close()
    except (OSError, EOFError):   # a worker died during the close
        _end(envs, workers)


def _end(envs, workers) -> None:
    """What close(terminate=True) does once its wait is over: end the workers, close the pipes, join; a worker
    that outlives SIGTERM (stopped, or ignoring it) by TERM_WAIT_S gets SIGKILL."""
    for p in workers:
        if p.is_alive():
            p.terminate()
    for pipe in envs.parent_pipes:
        if pipe is not None:
            pipe.close()
    stop_processes(workers, TERM_WAIT_S)
    envs.closed = True


class VectorSession:
    def __init__(self, envs, workload, workers):
        self.envs = envs
        self.obs, _ = envs.reset(seed=workload.seed)
        self.policy = for_vector_env(make_policy(workload, envs.single_observation_space, envs.single_action_space),
                                     envs.single_action_space)
        self.info = {"workers": workers}
        if self.policy.recurrent:
            self.step = self._step_recurrent
            self.starts = np.ones(envs.num_envs, dtype=np.bool_)

    def step(self) -> int:
        self.obs, _, _, _, _ = self.envs.step(self.policy(self.obs))
        return self.envs.num_envs

    def _step_recurrent(self) -> int:
        """The policy is told which observations start an episode: with same-step autoreset, those of the
        envs that were done."""
        self.obs, _, terminated, truncated, _ = self.envs.step(self.policy(self.obs, self.starts))
        self.starts = np.logical_or(terminated, truncated)
        return self.envs.num_envs

    def close(self):
        close_vector(self.envs)


def _same(batch, item, space) -> bool:
    """Whether a one-env batch holds `item`, part by part."""
    kind = type(space).__name__
    if kind == "Dict":
        return all(_same(batch[k], item[k], space[k]) for k in space.spaces)
    if kind == "Tuple":
        return all(_same(batch[i], item[i], s) for i, s in enumerate(space.spaces))
    if isinstance(batch, np.ndarray):
        return np.array_equal(batch[0], np.asarray(item))
    return batch[0] == item


def _space_label(space) -> str:
    """`Dict` holding what: the space's own type, and the first part inside a Dict or Tuple that is not an
    array space (the one that decides)."""
    inner = getattr(space, "spaces", None)
    parts = list(inner.values()) if isinstance(inner, dict) else list(inner) if isinstance(inner, tuple) else []
    odd = next((p for p in parts if type(p).__name__ not in ("Box", "Discrete", "MultiDiscrete", "MultiBinary")),
               None)
    return f"{type(odd).__name__} inside {type(space).__name__}" if odd is not None else type(space).__name__


class GymSync(Adapter):
    """gymnasium.vector.SyncVectorEnv; a registered subclass sets name and description (and environment)."""
    requires = ("gymnasium",)

    def open(self, workload, options):
        import gymnasium as gym
        envs = gym.vector.SyncVectorEnv(env_fns(workload), autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
        return VectorSession(envs, workload, workers=1)

    def snippet(self, workload, options):
        return (f"gymnasium.vector.SyncVectorEnv([lambda: {env_call(workload)}] * {workload.num_envs}, "
                "autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP)")


class GymAsync(Adapter):
    """gymnasium.vector.AsyncVectorEnv; a registered subclass sets name and description (and environment)."""
    requires = ("gymnasium",)
    options = (
        Option("shared_memory", bool, True, "observations through shared memory instead of pipes"),
        CONTEXT_OPTION,
    )

    def supports(self, workload, options):
        """Whether the observations live in gymnasium's shared memory as AsyncVectorEnv uses it, asked of
        gymnasium itself while planning: one env's buffer is made and read once (AsyncVectorEnv reads its
        batch once, at construction, and relies on it being a view), then an observation is written into it.
        Dynamic shapes (Sequence, Graph) and custom Space subclasses cannot be made (AsyncVectorEnv would fail
        once its workers start); a Text part is read as a copy, so the batch would never change. Planning runs
        in the main environment, so an adapter of another environment is asked of the main one's gymnasium."""
        if not options["shared_memory"] or not env_info(workload.env_id).probed:
            return None
        from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory
        space = spaces(workload.env_id, workload.env_kwargs)[0]
        fallback = f"{self.name} carries them with shared_memory=false, through its pipes"
        try:
            buffer = create_shared_memory(space, n=1)
        except Exception as exc:  # noqa: BLE001  (gymnasium's CustomSpaceError, TypeError for dynamic shapes)
            return (f"{_space_label(space)} observations cannot live in gymnasium's shared memory "
                    f"({type(exc).__name__}): {fallback}")
        batch = read_from_shared_memory(space, buffer, n=1)
        sample = space.sample()
        write_to_shared_memory(space, 0, sample, buffer)
        if not _same(batch, sample, space):
            return (f"{_space_label(space)} observations in gymnasium's shared memory are read as a copy, not a "
                    f"view: AsyncVectorEnv's batch would never change: {fallback}")
        return None

    def open(self, workload, options):
        import gymnasium as gym
        envs = gym.vector.AsyncVectorEnv(
            env_fns(workload), shared_memory=options["shared_memory"], context=options["context"],
            autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
        return VectorSession(envs, workload, workers=workload.num_envs)

    def tune_space(self, num_envs, cpus):
        """Pipes against shared memory: which wins depends on the observation's size."""
        return [{}, {"shared_memory": False}] if num_envs > 1 else [{}]

    def snippet(self, workload, options):
        return (f"gymnasium.vector.AsyncVectorEnv([lambda: {env_call(workload)}] * {workload.num_envs}, "
                f"shared_memory={options['shared_memory']}, context={options['context']!r}, "
                "autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP)")
