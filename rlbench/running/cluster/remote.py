"""One job on a cluster node, inside the Ray task that holds its reservation: lease the cores, run the
same Runner as on one machine (fresh interpreter, pinned, timed out, its tree and segments cleaned) in a
folder of the node's own, and hand back the row's result with the log (and profile) it wrote."""
import os
import shutil
import tempfile

from rlbench.running.cluster.cores import LeaseTimeout, lease, node_cores
from rlbench.running.reaper import Reaper
from rlbench.running.runner import Runner

LOG_TAIL_BYTES = 1 << 20   # what travels back of a cell's log


def run_job(job, index: int, settings, pythons: dict, pin: int, take: int) -> dict:
    """`pin`: cores the cell runs on; `take`: cores leased, more than pinned when the cell wants the node
    to itself."""
    import ray
    node = ray.get_runtime_context().get_node_id()
    cores = node_cores()
    where = {"node": node}
    python = pythons.get(job.cell.adapter)
    if python and not os.path.exists(python):
        return {**where, "status": "error", "error": f"{python} does not exist on this node "
                                                     "(make install-extras there, in the same folder)"}
    try:
        held = lease(take, cores, settings.timeout_s)
    except LeaseTimeout as exc:
        return {**where, "status": "error", "error": f"no cores: {exc}"}
    try:
        return _run_leased(job, index, settings, pythons, held.cores[:pin], where)
    finally:
        held.release()


def _run_leased(job, index: int, settings, pythons: dict, pinned, where: dict) -> dict:
    """The job in a folder of its own, which the watchdog removes if Ray kills this worker mid-job."""
    with Reaper(detached=True) as reaper:   # Ray kills a cancelled task's worker with its children: not this one
        out = tempfile.mkdtemp(prefix="rlbench-node-job-")
        reaper.track("node-job", folder=out)
        try:
            runner = Runner(settings, out, pythons=pythons, reaper=reaper)
            result = runner.run(job, index, cores=pinned)
            result.update(where, affinity=list(pinned), cpus=len(pinned), omp_threads=runner.threads(job, pinned),
                          log_text=_tail(os.path.join(out, result.get("log", ""))))
            if result.get("profile"):
                with open(os.path.join(out, result["profile"]), "rb") as f:
                    result["profile_bytes"] = f.read()
            return result
        finally:
            shutil.rmtree(out, ignore_errors=True)
            reaper.forget("node-job")


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - LOG_TAIL_BYTES))
            return f.read().decode(errors="replace")
    except OSError:
        return ""
