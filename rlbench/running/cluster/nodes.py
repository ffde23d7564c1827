"""Which nodes of the cluster a run measures on. Every node answers with its fingerprint; nodes whose
hardware and software are equal form a class, and a run uses one class (the largest, or the one named),
so every figure it compares comes from identical machines. A node whose rlbench or pins differ from the
driver's is refused before anything runs: its cells would measure other code."""
import glob
import hashlib
import json
import logging
import os
import sys
from dataclasses import asdict, dataclass, field

import rlbench
from rlbench.errors import UsageError
from rlbench.machine.fingerprint import fingerprint
from rlbench.running.cluster.cores import node_cores

SURVEY_TIMEOUT_S = 120.0
CLASS_KEYS = ("cpu_model", "cpu_physical_cores", "cpu_logical_cores", "os", "python", "packages")


@dataclass(frozen=True)
class Node:
    node_id: str
    host: str
    ip: str
    cpus: int          # what a cell may reserve there: Ray's CPU count, at most the cores rlbench may pin
    cores: tuple
    gpus: int

    @property
    def name(self) -> str:
        return f"{self.host}/{self.node_id[:8]}"


@dataclass(frozen=True)
class ClusterView:
    address: str
    class_id: str
    nodes: tuple
    fingerprint: dict
    classes: dict = field(default_factory=dict)   # class id -> {"fingerprint", "nodes"}
    left_out: tuple = ()                          # (node name, why)

    @property
    def cpus(self) -> int:
        """Cores of one node of the class (its smallest, should they differ in what Ray was told)."""
        return min(n.cpus for n in self.nodes)

    @property
    def gpus(self) -> int:
        return min(n.gpus for n in self.nodes)

    def record(self) -> dict:
        """env.json's "cluster"."""
        return {"address": self.address, "class": self.class_id, "nodes": [asdict(n) for n in self.nodes],
                "classes": self.classes, "left_out": [{"node": n, "reason": r} for n, r in self.left_out]}


def node_facts() -> dict:
    """Run on each node: what makes it comparable (its class) and what must equal the driver's."""
    import ray
    fp = fingerprint()
    cores = node_cores()
    return {"node_id": ray.get_runtime_context().get_node_id(), "host": fp["hostname"], "cores": list(cores),
            "class": class_fingerprint(fp, len(cores)), "code": code_identity(fp)}


def class_fingerprint(fp: dict, cores: int) -> dict:
    return {**{k: fp.get(k) for k in CLASS_KEYS}, "cores": cores, "ram_gb": round(fp.get("ram_gb") or 0),
            "gpus": [[g.get("name"), g.get("memory")] for g in fp.get("gpus") or []]}


def code_identity(fp: dict) -> dict:
    """rlbench's version and commit, and a hash of every pin file (constraints.txt, adapters/envs/*.txt)."""
    digest = hashlib.sha256()
    for path in sorted(glob.glob(os.path.join(rlbench.ROOT, "constraints.txt"))
                       + glob.glob(os.path.join(rlbench.ROOT, "adapters", "envs", "*.txt"))):
        with open(path, "rb") as f:
            digest.update(os.path.relpath(path, rlbench.ROOT).encode() + b"\0" + f.read())
    git = fp.get("git") or {}
    return {"rlbench": fp.get("rlbench_version"), "commit": git.get("commit"), "pins": digest.hexdigest()[:16]}


def class_id(fingerprint: dict) -> str:
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()[:8]


def connect(address: str) -> None:
    import ray
    if ray.is_initialized():
        return
    try:
        ray.init(address=address, namespace="rlbench", log_to_driver=False, logging_level=logging.ERROR)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"--cluster {address}: cannot join the Ray cluster ({first[:200]}); valid: 'auto' on a "
                         "node of a running cluster, or the head's HOST:PORT (`ray start --head` prints it)") from None


def disconnect() -> None:
    if "ray" in sys.modules:
        import ray
        if ray.is_initialized():
            ray.shutdown()


def survey(address: str, wanted_class: str = "") -> ClusterView:
    """Join the cluster, ask every live node for its facts, group them and pick the class to run on."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    connect(address)
    alive = [n for n in ray.nodes() if n.get("Alive")]
    facts = ray.remote(node_facts)
    asked = {n["NodeID"]: facts.options(num_cpus=0, max_retries=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
        n["NodeID"], soft=False)).remote() for n in alive}
    ready, _ = ray.wait(list(asked.values()), num_returns=len(asked), timeout=SURVEY_TIMEOUT_S)
    mine = code_identity(fingerprint())
    nodes, left, classes, refused = {}, [], {}, []
    for info in alive:
        nid, ref = info["NodeID"], asked[info["NodeID"]]
        label = f"{info.get('NodeManagerHostname', '?')}/{nid[:8]}"
        if ref not in ready:
            left.append((label, f"no answer in {SURVEY_TIMEOUT_S:g} s"))
            continue
        try:
            got = ray.get(ref)
        except ray.exceptions.RayError as exc:
            left.append((label, f"cannot run rlbench there: {str(exc).strip().splitlines()[-1][:200]}"))
            continue
        differs = [f"{k} {got['code'][k]} (driver: {mine[k]})" for k in mine if got["code"][k] != mine[k]]
        if differs:
            refused.append(f"{label}: {', '.join(differs)}")
            continue
        res = info.get("Resources", {})
        cpus = min(int(res.get("CPU", 0)), len(got["cores"]))
        node = Node(nid, got["host"], info.get("NodeManagerAddress", ""), cpus, tuple(got["cores"]),
                    int(res.get("GPU", 0)))
        if node.cpus < 1:
            left.append((label, f"no CPU to reserve (Ray CPUs {res.get('CPU', 0):g}, cores {list(node.cores)})"))
            continue
        cid = class_id(got["class"])
        classes.setdefault(cid, {"fingerprint": got["class"], "nodes": []})["nodes"].append(node.name)
        nodes.setdefault(cid, []).append(node)
    if refused:
        raise UsageError(f"--cluster {address}: node(s) with other code than this driver's, refused: "
                         f"{'; '.join(refused)} (every node needs the same rlbench checkout and pins)")
    if not nodes:
        why = "; ".join(f"{n}: {r}" for n, r in left) or "no live node"
        raise UsageError(f"--cluster {address}: no node can run cells ({why})")
    if wanted_class and wanted_class not in nodes:
        raise UsageError(f"--node-class {wanted_class!r} (valid: "
                         + ", ".join(f"{c} ({len(ns)} nodes)" for c, ns in nodes.items()) + ")")
    chosen = wanted_class or max(nodes, key=lambda c: (len(nodes[c]), sum(n.cpus for n in nodes[c])))
    for cid, ns in nodes.items():
        if cid != chosen:
            left += [(n.name, f"class {cid}, not the class run on ({chosen}): "
                      + _difference(classes[cid]["fingerprint"], classes[chosen]["fingerprint"])) for n in ns]
    return ClusterView(address, chosen, tuple(sorted(nodes[chosen], key=lambda n: n.name)),
                       classes[chosen]["fingerprint"], classes, tuple(left))


def _difference(a: dict, b: dict) -> str:
    keys = [k for k in a if a[k] != b.get(k)]
    return ", ".join(f"{k} {a[k]!r} vs {b.get(k)!r}" for k in keys[:3] if k != "packages") or \
        ("package versions differ" if "packages" in keys else "")
