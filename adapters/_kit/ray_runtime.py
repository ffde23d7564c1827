"""Ray for one cell: join the cluster RAY_ADDRESS names (`--ray-address`), or start a small local
instance and, on close, make sure every process it started (GCS, raylet, actor workers) is gone."""
import os
import time
from time import perf_counter

from rlbench.api import become_subreaper


def start(num_cpus: int, object_store_memory: int = None):
    """ray.init() -> (seconds it took, a shutdown callable). `object_store_memory` (bytes) sizes a local
    instance's object store (Ray's default otherwise); a joined cluster keeps the store it has."""
    import ray
    address = os.environ.get("RAY_ADDRESS", "")
    before = _descendants()
    if not address:
        become_subreaper()  # ray.shutdown() may orphan actor workers: adopt, then reap them
    t0 = perf_counter()
    if address:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    else:
        sized = {"object_store_memory": int(object_store_memory)} if object_store_memory else {}
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, configure_logging=False, **sized)
    init_s = perf_counter() - t0
    return init_s, (lambda: _shutdown(ray, before, local=not address))


def cluster_info(ray) -> dict:
    """The cluster's nodes and resources, as env.json records them."""
    nodes = [{"node_id": n["NodeID"], "address": n["NodeManagerAddress"], "hostname": n.get("NodeManagerHostname"),
              "alive": n["Alive"], "resources": n["Resources"]} for n in ray.nodes()]
    return {"address": os.environ.get("RAY_ADDRESS") or "local", "ray_version": ray.__version__,
            "nodes": nodes, "resources": ray.cluster_resources()}


def _descendants() -> dict:
    import psutil
    return {p.pid: p for p in psutil.Process().children(recursive=True)}


def _exited(p) -> bool:
    import psutil
    try:
        os.waitpid(p.pid, os.WNOHANG)  # reaps it once it is our (adopted) child and has exited
    except ChildProcessError:
        pass
    try:
        return p.status() == psutil.STATUS_ZOMBIE  # exited; whoever is its parent reaps it
    except psutil.NoSuchProcess:
        return True


def _wait_exited(procs, timeout_s: float) -> list:
    deadline = time.monotonic() + timeout_s
    while procs and time.monotonic() < deadline:
        procs = [p for p in procs if not _exited(p)]
        if procs:
            time.sleep(0.05)
    return [p for p in procs if not _exited(p)]


def _shutdown(ray, before: dict, local: bool, grace_s: float = 30.0):
    """ray.shutdown(); for a local instance also wait for (then kill) every process it started."""
    import psutil
    started = [p for pid, p in _descendants().items() if pid not in before]
    ray.shutdown()
    if not local:
        return
    for p in _wait_exited(started, grace_s):
        try:
            p.kill()
        except psutil.Error:
            pass
    _wait_exited(started, 5.0)
