"""The adapters' facade: everything an adapter may import from rlbench, in one place (an adapter imports
this module and `adapters._kit`, nothing else of rlbench; import-linter checks it). No core module
imports this one: the core depends on `rlbench.contract`, the leaf these names come from. What only one
family's adapters share lives with that family (rlbench.families.replay.api).
"""
from rlbench.contract import Adapter, JaxEnvApi, Metrics, Option, Session
from rlbench.envs import (
                          USER_FAMILIES,
                          build_user_env,
                          env_and_params,
                          env_api,
                          env_call,
                          env_fns,
                          env_info,
                          envpool_kwargs,
                          jax_api,
                          jax_env_api,
                          jax_env_apis,
                          make_env,
                          spaces,
                          unsupported_leaves,
                          unsupported_spaces,
)
from rlbench.errors import Unsupported, UsageError
from rlbench.policy import make_policy
from rlbench.registry import register, register_jax_env_api, register_policy
from rlbench.results.metrics import SESSION_METRICS
from rlbench.running.forking import freeze_gc_across_forks
from rlbench.running.proctree import become_subreaper  # for adapters whose framework orphans processes
from rlbench.workload import PolicySpec, Workload

__all__ = [
    # the contract
    "Adapter", "Option", "Session", "Metrics", "register", "Unsupported", "SESSION_METRICS",
    # the workload and how to build it
    "Workload", "PolicySpec", "make_env", "env_fns", "env_info", "envpool_kwargs", "make_policy",
    "register_policy", "become_subreaper",
    # the user's envs (families gymnasium and custom): their spaces, and the reason an adapter cannot carry them
    "USER_FAMILIES", "spaces", "unsupported_spaces", "unsupported_leaves",
    "env_call",
    # a user's JAX env (family custom, built by its factory): its API, and the env itself
    "env_api", "jax_api", "build_user_env", "env_and_params",
    # the JAX env APIs (plug-ins: rlbench.contract.JaxEnvApi), in listing order, and one by name
    "JaxEnvApi", "register_jax_env_api", "jax_env_apis", "jax_env_api", "UsageError",
]

# every process that runs an adapter forks safely: a forked worker never frees its parent's objects
freeze_gc_across_forks()
