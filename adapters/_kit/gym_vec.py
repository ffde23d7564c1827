"""Closing a gymnasium vector env that a failure left half-way.

AsyncVectorEnv.close() first waits for the call in flight, even with terminate=True: when that call failed
part-way through (a worker died, an interrupt), it reads again the pipes read before the failure (and waits
forever) or the dead worker's (and raises), and the live workers are left running either way. Our sessions only
close between calls, so a call still in flight, or a worker found dead, means a failure: the workers are then
ended here, without that wait.
"""

from adapters._kit.procs import stop_processes

TERM_WAIT_S = 5.0   # how long a worker may outlive SIGTERM before it gets SIGKILL


def close_vector(envs) -> None:
    """Close a SyncVectorEnv or AsyncVectorEnv, whatever state a failure left it in."""
    workers = [p for p in getattr(envs, "processes", ()) if p is not None]   # AsyncVectorEnv's
    if not workers:
        envs.close()
        return
    from gymnasium.vector.async_vector_env import AsyncState
    if envs._state is not AsyncState.DEFAULT or any(not p.is_alive() for p in workers):
        _end(envs, workers)
        return
    try:
        envs.close()
    except (OSError, EOFError):   # a worker died during the close
        _end(envs, workers)


def _end(envs, workers) -> None:
    """What close(terminate=True) does once its wait is over: end the workers, close the pipes, join; a worker
    that outlives SIGTERM (stopped, or ignoring it) by TERM_WAIT_S gets SIGKILL."""
    for p in workers:
        if p.is_alive():
            p.terminate()
    for pipe in envs.parent_pipes:
        if pipe is not None:
            pipe.close()
    stop_processes(workers, TERM_WAIT_S)
    envs.closed = True
