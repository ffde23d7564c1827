"""Read-only values of a run's records: what was read from JSON stays as it was read."""


class FrozenDict(dict):
    """A run's table values (env_kwargs, options, device_settings, ...): read as the dict it was (JSON, pandas,
    ==), refused any change in place."""
    __slots__ = ()

    def _read_only(self, *args, **kwargs):
        raise TypeError("a run's values are read-only")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self):
        return FrozenDict, (dict(self),)


def freeze(value):
    if isinstance(value, dict):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value):
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value
