"""Observations of a stepping adapter's session, step by step, with the same seed and random actions: what
the equivalence tests compare between adapters."""
import numpy as np

from rlbench import registry

STEPS = 300  # random CartPole episodes last ~20 steps: many auto-resets happen on the way


def _trajectory(adapter, workload, options=None):
    cls = registry.get(adapter)
    session = cls().open(workload, cls.resolve_options(options or {}))
    try:
        observations = [np.array(session.obs, copy=True)]
        for _ in range(STEPS):
            assert session.step() == workload.num_envs
            observations.append(np.array(session.obs, copy=True))
        return np.stack(observations)
    finally:
        session.close()
