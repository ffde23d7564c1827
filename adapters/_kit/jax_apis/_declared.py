"""What a JAX env declares, read without JAX: its methods and attributes (for detect) and its spaces as gymnasium's
(for planning), by the names each package gives them."""
import inspect


def has_methods(env, *names) -> bool:
    """Whether `env` has each of these as a callable."""
    return all(callable(getattr(env, m, None)) for m in names)


def has_attributes(env, *names) -> bool:
    return all(hasattr(env, m) for m in names)


def has_static(env, *names) -> bool:
    """Whether `env` has each of these, set: looked up, not read (Brax's observation_size is a property that
    resets the env to find out)."""
    return all(inspect.getattr_static(env, m, None) is not None for m in names)


def spaces_as_attributes(env) -> bool:
    """Whether its action_space and observation_space are spaces (Navix's, gxm's), not methods (gymnax's)."""
    return all(getattr(env, m, None) is not None and not callable(getattr(env, m))
               for m in ("action_space", "observation_space"))


def box(shape):
    """The observation space of an API that states only a shape, or a dict of them (Pgx, XLand-MiniGrid,
    MuJoCo Playground's observation_size): planning reads its size."""
    import gymnasium as gym
    import numpy as np
    if isinstance(shape, dict):
        return gym.spaces.Dict({k: box(v) for k, v in shape.items()})
    return gym.spaces.Box(-np.inf, np.inf, tuple(shape), np.float32)


def declares(space, name: str) -> bool:
    """hasattr for the spaces of JAX env packages, whose properties may raise anything for what they lack
    (gxm's Box.n: NotImplementedError)."""
    try:
        getattr(space, name)
    except Exception:  # noqa: BLE001  (the package's property, not rlbench, chose the error)
        return False
    return True


def declared_actions(space, low: str = "minimum", high: str = "maximum"):
    """A Discrete (Navix's count is maximum + 1) or a bounded box (Navix's minimum and maximum, gxm's low and
    high) as gymnasium's."""
    import gymnasium as gym
    import numpy as np
    if declares(space, "n"):
        return gym.spaces.Discrete(int(space.n))
    if not (declares(space, low) and declares(space, high)):
        return space   # named as it is, and refused by the adapters' space check
    shape = tuple(space.shape)
    low, high = (np.broadcast_to(np.asarray(getattr(space, b), np.float32), shape) for b in (low, high))
    return gym.spaces.Box(low, high, shape, np.float32)


def declared_shapes(space):
    """gxm's observation space (a Box, a Discrete, or a Tree of them) as its shapes, a dict for a Tree."""
    inner = getattr(space, "spaces", None)
    if isinstance(inner, dict):
        return {str(k): declared_shapes(v) for k, v in inner.items()}
    if isinstance(inner, (list, tuple)):
        return {str(i): declared_shapes(v) for i, v in enumerate(inner)}
    return tuple(int(d) for d in (getattr(space, "shape", None) or ()))


def declared_boxes(space, name: str):
    """(name, Box) per array of a declared space: one space with a shape (Hanabi's an int), or a dict of them
    (STORM's), their names joined with "/"."""
    import numpy as np
    if isinstance(space, dict):
        for key, inner in space.items():
            yield from declared_boxes(inner, f"{name}/{key}")
        return
    yield name, box(tuple(np.reshape(space.shape, -1).astype(int).tolist()))
