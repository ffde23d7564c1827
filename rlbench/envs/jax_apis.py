"""The JAX env APIs a user's factory may return, as rlbench.registry finds them (the kit's built-ins, then the
`rlbench.jax_env_apis` entry-point group; the contract: rlbench.contract.JaxEnvApi): which one an env offers, the
(env, params) pair a factory may return, and the APIs in the words of messages. The core names none of them."""
import functools

from rlbench.errors import UsageError


def jax_env_apis() -> tuple:
    """Every registered JAX env API, one instance each, in listing order."""
    from rlbench import registry
    return registry.jax_env_apis()


def jax_env_api(name: str):
    """The registered API called `name`; a UsageError naming the registered ones for any other."""
    for api in jax_env_apis():
        if api.name == name:
            return api
    raise UsageError(f"unknown JAX env API '{name}' (valid: {', '.join(a.name for a in jax_env_apis())})")


@functools.cache
def detection_order() -> tuple:
    """The APIs in the order `api_of` asks them: listing order, except that an API goes just before the first
    of those named in its `tried_before` (their detect() accepts its envs too)."""
    order = []
    for api in jax_env_apis():
        ahead = [i for i, placed in enumerate(order) if placed.name in api.tried_before]
        order.insert(min(ahead) if ahead else len(order), api)
    return tuple(order)


def api_of(env):
    """The API `env` offers (the first that detects it), or None: the packages' envs and a user's env written to
    one of them alike."""
    return next((api for api in detection_order() if api.detect(env)), None)


def jax_api(env) -> str:
    """The name of the JAX API `env` offers ("" for none)."""
    api = api_of(env)
    return api.name if api is not None else ""


def env_and_params(built) -> tuple:
    """(env, params) of what build_user_env returned for a JAX env: an API's (env, params) pair, or (env, None)."""
    return built if isinstance(built, tuple) else (built, None)


def described() -> str:
    """The registered APIs as messages list them: "gymnax's (reset, step, ...), ... or JaxMARL's (...)"."""
    words = [f"{api.title} ({api.description})" for api in jax_env_apis()]
    if len(words) < 2:
        return "".join(words) or "no registered API"
    return f"{', '.join(words[:-1])} or {words[-1]}"
