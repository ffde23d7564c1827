"""Wrappers of the kind a user always applies before training, named to rlbench by import path so that every
process that builds an env applies them the same way:

    PYTHONPATH=examples rlbench run --adapter serial --adapter tianshou-subproc --num-envs 4 \\
        --env toyenvs:make_corridor --env-kwarg obs=tuple --env-wrapper toyenvs.wrappers:flatten

A wrapper is any callable taking an env and returning the wrapped env.
"""
import gymnasium as gym


def flatten(env):
    """Any observation space as one float vector (what an MLP takes; what strategies without Tuple or
    Dict transport can carry)."""
    return gym.wrappers.FlattenObservation(env)


def stack4(env):
    """The last four observations, as frame stacks are used with pixel envs."""
    return gym.wrappers.FrameStackObservation(env, 4)
