"""examples/toyenvs' corridor under a stepping adapter: its sessions opened directly, their observation batches
step by step (a Dict or Tuple batch part by part), and serial's, to compare every adapter's against: what the
user env and env wrapper tests share."""
import numpy as np

from rlbench import registry

SHORT = {"length": 6, "episode_len": 7}    # episodes of a few steps: auto-resets all along
N, STEPS = 4, 24


def _open(adapter, workload, options=None):
    cls = registry.get(adapter)
    opts = cls.resolve_options(options or {})
    assert cls().supports(workload, opts) is None
    return cls().open(workload, opts)


def _parts(batch, path="") -> dict:
    """A batch of observations as {path: array}: a Dict or Tuple batch part by part, copied."""
    if isinstance(batch, dict):
        return {k: v for key in batch for k, v in _parts(batch[key], f"{path}/{key}").items()}
    if isinstance(batch, tuple):
        return {k: v for i, part in enumerate(batch) for k, v in _parts(part, f"{path}/{i}").items()}
    return {path: np.array(batch, copy=True)}


def _assert_same(got: list, want: list, what: str):
    assert len(got) == len(want), what
    for t, (g, w) in enumerate(zip(got, want)):
        assert g.keys() == w.keys(), f"{what} step {t}: parts {sorted(g)} != {sorted(w)}"
        for key in w:
            assert g[key].dtype == w[key].dtype and g[key].shape == w[key].shape, f"{what} step {t} {key}"
            np.testing.assert_array_equal(g[key], w[key], err_msg=f"{what} step {t} {key}")


def _trajectory(adapter, workload, options=None, steps=STEPS) -> list:
    """The observation batch after reset and after each of `steps` steps, each step counted num_envs."""
    session = _open(adapter, workload, options)
    try:
        out = [_parts(session.obs)]
        for _ in range(steps):
            assert session.step() == workload.num_envs
            out.append(_parts(session.obs))
        return out
    finally:
        session.close()


_SERIAL = {}


def _serial(workload) -> list:
    key = repr(workload)
    if key not in _SERIAL:
        _SERIAL[key] = _trajectory("serial", workload, steps=STEPS)
    return _SERIAL[key]
