"""The environments rlbench knows, named as EnvPool names them, and how every adapter builds them: same env, same
preprocessing, same seeds, which is what makes strategies comparable. Any other env is the user's (a registered
gymnasium id, `module:EnvId-v0`, a factory, or a JAX env of a registered JAX env API: gymnax's, Jumanji's, ... or a
plug-in's); one instance is built while planning (`probing`), so an env that does not import or build is refused
before anything runs. Preprocessing and accounting: docs/protocol.md ("Environments and policies"), docs/tune.md
and docs/strategies/jax.md (Brax).

One module per job, each importing only those above it here: `jax_apis` (the registered JAX env APIs: which one an
env offers), `users` (the user's targets, wrappers, building them while planning), `catalogue` (rlbench's own ids,
Atari, `env_info`), `making` (`make_env`, EnvPool's arguments, the user's call), `probing` (spaces and API read from
a built env, the reasons an adapter refuses them), `kwargs` (env arguments checked and typed). Import the names
from `rlbench.envs`.
"""
from rlbench.envs.catalogue import (
    ATARI,
    ATARI_ID,
    ENVS,
    USER_FAMILIES,
    WRAP,
    EnvInfo,
    atari_games,
    env_info,
    frameskip_of,
    wrapped_id,
)
from rlbench.envs.jax_apis import env_and_params, jax_api, jax_env_api, jax_env_apis
from rlbench.envs.kwargs import planned_env_kwargs, string_arguments, typed_env_kwargs, user_env_kwargs
from rlbench.envs.making import env_call, env_fns, envpool_kwargs, make_env
from rlbench.envs.probing import (
    SPACES,
    api_refusal,
    env_api,
    refusal,
    space_leaves,
    space_name,
    spaces,
    unsupported_leaves,
    unsupported_spaces,
)
from rlbench.envs.users import build_user_env, in_cell

__all__ = [
    "ATARI", "ATARI_ID", "ENVS", "USER_FAMILIES", "WRAP", "EnvInfo", "atari_games", "env_info", "frameskip_of",
    "wrapped_id", "env_and_params", "jax_api", "jax_env_api", "jax_env_apis", "planned_env_kwargs",
    "string_arguments", "typed_env_kwargs", "user_env_kwargs", "env_call", "env_fns", "envpool_kwargs", "make_env",
    "SPACES", "api_refusal", "env_api", "refusal", "space_leaves", "space_name", "spaces",
    "unsupported_leaves", "unsupported_spaces", "build_user_env", "in_cell",
]
