"""A cell's py-spy profile (speedscope, every process of the cell) summarised as time per stage: where did the
seconds go — stepping envs, choosing actions, moving data between processes, learning, or the harness and
start-up. Each sample goes to one of STAGES by its stack (`classify`: the first rule that matches); weights are
py-spy's seconds, summed over every process and thread. The rules: docs/report.md, "The py-spy stages".
"""
import json
import re

STAGES = ("env", "inference", "learner", "ipc", "harness", "other", "setup")

_IPC_FILES = re.compile(r"multiprocessing/(connection|queues|reduction|synchronize|shared_memory|managers|"
                        r"resource_sharer|popen_\w+|process)\.py$|/(pickle|copyreg|selectors|socket|"
                        r"threading|queue)\.py$|ray/_private/(worker|serialization)\.py$|ray/_raylet")
_ENV_FILES = re.compile(r"gymnasium/(envs|wrappers|core\.py|vector/utils)|ale_py/|envpool/|mujoco/|gymnax/|"
                        r"brax/envs|rlbench/synthetic\.py|rlbench/envs(\.py|/)")
_LEARN_FILES = re.compile(r"torch/(autograd/(?!grad_mode)|optim/)")
_STDLIB = re.compile(r"/lib/python3\.\d+/(?!site-packages/)")
_LEARN_NAMES = re.compile(r"(^|[._])(backward|learn|update|train|loss)", re.IGNORECASE)
_INFER_FILES = re.compile(r"torch/nn/|rlbench/policy\.py$|adapters/torch_policies\.py$")
_CORE_FILES = re.compile(r"rlbench/(running/(timing|child|runner|proctree)|busy)\.py$")


def classify(stack) -> str:
    """stack: [(name, file), ...] from the root to the leaf."""
    if not stack:
        return "other"
    leaf_name, leaf_file = stack[-1]
    if _IPC_FILES.search(leaf_file):
        return "ipc"
    if any(f.startswith("<frozen importlib") for _, f in stack):
        return "setup"
    names = {(n, f.rsplit("/", 1)[-1]) for n, f in stack}
    if ("run_cell", "child.py") in names and ("measure", "timing.py") not in names:
        return "setup"
    if any(_ENV_FILES.search(f) for _, f in stack):
        return "env"
    if any(_LEARN_FILES.search(f) or (_LEARN_NAMES.search(n) and f and not _STDLIB.search(f)) for n, f in stack):
        return "learner"
    if any(_INFER_FILES.search(f) for _, f in stack):
        return "inference"
    if _CORE_FILES.search(leaf_file):
        return "harness"
    return "other"


def breakdown(path: str) -> dict:
    """stage -> seconds over every process and thread of a speedscope file (py-spy's sampled profiles)."""
    with open(path) as f:
        doc = json.load(f)
    frames = [(fr.get("name", ""), fr.get("file") or "") for fr in doc["shared"]["frames"]]
    out = dict.fromkeys(STAGES, 0.0)
    for profile in doc.get("profiles", []):
        if profile.get("type") != "sampled":
            continue
        cache = {}
        for sample, weight in zip(profile["samples"], profile["weights"]):
            key = tuple(sample)
            if key not in cache:
                cache[key] = classify([frames[i] for i in sample])
            out[cache[key]] += weight
    return out
