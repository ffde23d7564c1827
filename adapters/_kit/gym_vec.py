"""Closing a gymnasium vector env that a failure left half-way.

AsyncVectorEnv.close() first waits for the call in flight, even with terminate=True: when that call failed
part-way through, it reads again the pipes read before the failure (and waits forever) or the dead worker's
(and raises), and the live workers are left running either way. So with a worker found dead the workers are
ended here, without that wait, and a call still pending on live workers gets PENDING_S to finish.
"""

PENDING_S = 5.0


def close_vector(envs) -> None:
    """Close a SyncVectorEnv or AsyncVectorEnv, whatever state a failure left it in."""
    workers = [p for p in getattr(envs, "processes", ()) if p is not None]   # AsyncVectorEnv's
    if any(not p.is_alive() for p in workers):
        _end(envs, workers)
        return
    try:
        envs.close(timeout=PENDING_S)
    except (OSError, EOFError):   # a worker died during the close
        _end(envs, workers)


def _end(envs, workers) -> None:
    """What close(terminate=True) does once its wait is over: end the workers, close the pipes, join."""
    for p in workers:
        if p.is_alive():
            p.terminate()
    for pipe in envs.parent_pipes:
        if pipe is not None:
            pipe.close()
    for p in workers:
        p.join()
    envs.closed = True
