"""`gymnasium-sync` and `gymnasium-async`: gymnasium's own SyncVectorEnv and AsyncVectorEnv.

Both reset a finished env within the same step (AutoresetMode.SAME_STEP), as `serial` does, so
every adapter counts the same transitions.
"""

import numpy as np

from adapters._kit.gym_vec import close_vector
from adapters._kit.procs import CONTEXT_OPTION
from rlbench.api import (
    Adapter,
    Option,
    env_call,
    env_fns,
    env_info,
    make_policy,
    register,
    spaces,
    structured_actions,
)


class VectorSession:
    def __init__(self, envs, workload, workers):
        self.envs = envs
        self.obs, _ = envs.reset(seed=workload.seed)
        self.policy = make_policy(workload, envs.single_observation_space, envs.single_action_space)
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
    import numpy as np
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


@register
class GymnasiumSync(Adapter):
    name = "gymnasium-sync"
    description = "gymnasium.vector.SyncVectorEnv: all envs in this process"
    requires = ("gymnasium",)

    def supports(self, workload, options):
        return structured_actions(workload, self.name)

    def open(self, workload, options):
        import gymnasium as gym
        envs = gym.vector.SyncVectorEnv(env_fns(workload), autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
        return VectorSession(envs, workload, workers=1)

    def snippet(self, workload, options):
        return (f"gymnasium.vector.SyncVectorEnv([lambda: {env_call(workload)}] * {workload.num_envs}, "
                "autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP)")


@register
class GymnasiumAsync(Adapter):
    name = "gymnasium-async"
    description = "gymnasium.vector.AsyncVectorEnv: one subprocess per env, pipes or shared memory"
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
        once its workers start); a Text part is read as a copy, so the batch would never change."""
        actions = structured_actions(workload, self.name)
        if actions or not options["shared_memory"] or not env_info(workload.env_id).probed:
            return actions
        from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory
        space = spaces(workload.env_id, workload.env_kwargs)[0]
        fallback = "gymnasium-async carries them with shared_memory=false, through its pipes"
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
