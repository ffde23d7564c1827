"""The driver's side of a cluster sweep: jobs go out in the plan's interleaved order, each in a STRICT_PACK placement
group holding the cores (and GPU) it needs on one node of the run's class, as many at once as the class has room
for. Ray never retries a job: a node lost under one makes it a `lost` row naming the node. However the sweep
ends, nothing it started stays on any node (docs/clusters.md, "Faults").
"""
import os
import time
from dataclasses import dataclass

from rlbench import registry
from rlbench.running.cluster.remote import run_job

GUARD_S = 120.0        # beyond a job's own timeout and core wait, what the driver waits before calling it lost
NO_NODE_S = 60.0       # a reservation pending this long with nothing out: are the class's nodes still there?


@dataclass
class Slot:
    """One reservation: a placement group of one bundle."""
    shape: tuple           # (cores reserved, GPUs)
    group: object
    ready: object          # the group's readiness, asked once (each ask is a task of its own)
    node: str = ""
    since: float = 0.0


@dataclass
class Out:
    job: object
    index: int
    slot: Slot
    ref: object = None
    since: float = 0.0


def demand(cell, settings, view) -> tuple:
    """(cores pinned, cores reserved, GPUs) of a cell on a node of the class: `cores` (or the size of its
    affinity) pinned, the whole node when it says neither; reserved: those, or the whole node when it says
    neither or says exclusive."""
    s = cell.settings(settings)
    want = s.cores or len(cell.cpus(settings))
    take = view.cpus if (s.exclusive or not want) else want
    return want or take, take, (1 if view.gpus and wants_gpu(cell) else 0)


def wants_gpu(cell) -> bool:
    """Whether a cell's job needs the node's GPU: its policy or `device` option says CUDA, or its adapter requires a
    framework whose programs run on the accelerator whatever those say (a family's `accelerator_framework`: JAX)."""
    requires = registry.get(cell.adapter).requires
    return cell.workload.policy.device_label.startswith("cuda") or \
        str(cell.options.get("device", "")).startswith(("cuda", "gpu")) or \
        any(f.accelerator_framework in requires for f in registry.families() if f.accelerator_framework)


def too_big(cells, settings, view) -> list:
    """The cells no node of the class can hold, as sentences."""
    return [f"{c.cell_id} wants {demand(c, settings, view)[0]} cores; nodes of class {view.class_id} have {view.cpus}"
            for c in cells if demand(c, settings, view)[0] > view.cpus]


class ClusterDispatch:
    def __init__(self, view, settings, pythons: dict):
        self.view, self.settings, self.pythons = view, settings, pythons
        self.selector = {"ray.io/node-id": "in(" + ",".join(n.node_id for n in view.nodes) + ")"}
        self.task = None
        self.dead = set()   # nodes a job was lost on: no room is counted there any more

    def run(self, jobs, started, finished, admit=None) -> None:
        """jobs: (job, log index) in order. started(job) as one leaves; finished(job, result) as one ends,
        in the order they end; admit(job) whether one may still leave (tune's budget)."""
        import ray
        pending, out, idle, waiting, head = list(jobs), {}, [], None, None

        def send(o: Out) -> None:
            self._launch(o, started)
            out[o.ref] = o
        try:
            while pending or head or out or waiting:
                if head is None and pending:
                    head = pending.pop(0)
                    if admit is not None and not admit(head[0]):
                        head = None
                        continue
                if waiting is None and head is not None:
                    waiting = self._place(head, out, idle)
                    if waiting is not None:
                        head = None
                if waiting is not None and idle:  # room of ours came free while Ray had no room for it
                    waiting = self._rehome(waiting, idle)
                if waiting is not None and waiting.slot.node:  # a group held from a job before: out at once
                    send(waiting)
                    waiting = None
                    continue
                refs = [o.ref for o in out.values()] + ([waiting.slot.ready] if waiting else [])
                ready, _ = ray.wait(refs, num_returns=1, timeout=5.0) if refs else ([], [])
                for ref in ready:
                    if waiting is not None and ref is waiting.slot.ready:
                        send(waiting)
                        waiting = None
                    else:
                        done = out.pop(ref)
                        result = self._result(done)
                        result["node"] = self._name(result.get("node") or done.slot.node)
                        finished(done.job, result)
                        if result["status"] == "lost":
                            self.dead.add(done.slot.node)
                        self._release(done.slot, idle, keep=result["status"] != "lost")
                for ref, o in list(out.items()):
                    guard_s = self._guard_s(o.job)
                    if time.monotonic() - o.since > guard_s:
                        ray.cancel(ref, force=True)
                        out.pop(ref)
                        finished(o.job, lost(self._name(o.slot.node), f"no answer from its node in {guard_s:.0f} s"))
                        self._release(o.slot, idle, keep=False)
                if waiting is not None and not out and time.monotonic() - waiting.slot.since > NO_NODE_S \
                        and not self._class_alive():
                    for job, _ in [(waiting.job, waiting.index), *([head] if head else []), *pending]:
                        finished(job, lost("", f"no node of class {self.view.class_id} is left in the cluster"))
                    self._release(waiting.slot, idle, keep=False)
                    waiting, head, pending = None, None, []
        finally:
            for o in out.values():
                ray.cancel(o.ref, force=True)
            for slot in [*(o.slot for o in out.values()), *([waiting.slot] if waiting else []), *idle]:
                _remove(slot)

    def _place(self, head, out, idle):
        """The next job with its reservation (an idle one of its shape, or a new one where our accounting
        sees room), or None while it must wait for a job to end."""
        job, index = head
        shape = demand(job.cell, self.settings, self.view)[1:]
        slot = next((s for s in idle if s.shape == shape), None)
        if slot is not None:
            idle.remove(slot)
        elif self._fits(shape, [o.slot for o in out.values()] + idle):
            slot = self._reserve(shape, index)
        elif idle:  # the room is held by groups of other shapes: let them go
            _remove_all(idle)
            return self._place(head, out, idle)
        elif not out:  # nothing of ours holds room: Ray knows when some comes free
            slot = self._reserve(shape, index)
        return Out(job, index, slot) if slot is not None else None

    def _rehome(self, waiting: Out, idle: list) -> Out:
        """A job whose group is not placed yet takes an idle group of its shape; else the idle groups go, so
        that its own can be placed."""
        same = next((s for s in idle if s.shape == waiting.slot.shape), None)
        if same is None:
            _remove_all(idle)
            return waiting
        idle.remove(same)
        _remove(waiting.slot)
        return Out(waiting.job, waiting.index, same)

    def _fits(self, shape, held) -> bool:
        """Whether a node of the class has room beside what this run holds there."""
        used = {}
        for s in held:
            c, g = used.get(s.node, (0, 0))
            used[s.node] = (c + s.shape[0], g + s.shape[1])
        return any(n.cpus - used.get(n.node_id, (0, 0))[0] >= shape[0] and
                   n.gpus - used.get(n.node_id, (0, 0))[1] >= shape[1]
                   for n in self.view.nodes if n.node_id not in self.dead)

    def _reserve(self, shape, index) -> Slot:
        from ray.util.placement_group import placement_group
        bundle = {"CPU": shape[0], **({"GPU": shape[1]} if shape[1] else {})}
        group = placement_group([bundle], strategy="STRICT_PACK", bundle_label_selector=[self.selector],
                                name=f"rlbench-{os.getpid()}-{index}")
        return Slot(shape, group, group.ready(), since=time.monotonic())

    def _launch(self, o: Out, started) -> None:
        import ray
        from ray.util.placement_group import placement_group_table
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        if self.task is None:  # made once: each ray.remote() ships the function to the cluster again
            self.task = ray.remote(run_job)
        pin, take, gpus = demand(o.job.cell, self.settings, self.view)
        o.slot.node = placement_group_table(o.slot.group)["bundles_to_node_id"].get(0, "")
        o.ref = self.task.options(num_cpus=take, num_gpus=gpus, max_retries=0, retry_exceptions=False,
                                  scheduling_strategy=PlacementGroupSchedulingStrategy(o.slot.group, 0)).remote(
            o.job, o.index, self.settings, self.pythons, pin, take)
        o.since = time.monotonic()
        started(o.job)

    def _release(self, slot: Slot, idle: list, keep: bool) -> None:
        if keep:
            idle.append(slot)
        else:
            _remove(slot)

    def _result(self, o: Out) -> dict:
        import ray
        try:
            return ray.get(o.ref)
        except ray.exceptions.RayTaskError as exc:  # rlbench's own code failed on the node: a bug to see
            return {"status": "error", "error": f"on node {self._name(o.slot.node)}: "
                                                f"{str(exc).strip().splitlines()[-1][:300]}", "node": o.slot.node}
        except ray.exceptions.RayError as exc:      # the worker, its node or the connection went away
            return lost(o.slot.node, f"{type(exc).__name__} on node {self._name(o.slot.node)}")

    def _guard_s(self, job) -> float:
        return 2 * job.cell.settings(self.settings).timeout_s + GUARD_S

    def _class_alive(self) -> bool:
        import ray
        ids = {n.node_id for n in self.view.nodes}
        return any(n.get("Alive") and n["NodeID"] in ids for n in ray.nodes())

    def _name(self, node_id: str) -> str:
        return next((n.name for n in self.view.nodes if n.node_id == node_id), node_id[:8] or "?")


def _remove(slot: Slot) -> None:
    from ray.util.placement_group import remove_placement_group
    try:
        remove_placement_group(slot.group)
    except Exception:  # noqa: BLE001  the cluster is gone: nothing of it is held any more
        pass


def _remove_all(slots: list) -> None:
    for slot in slots:
        _remove(slot)
    slots.clear()


def lost(node: str, why: str) -> dict:
    return {"status": "lost", "error": f"lost: {why}", "node": node}
