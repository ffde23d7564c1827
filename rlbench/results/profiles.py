"""A cell's py-spy profile (speedscope, every process of the cell) summarised as time per stage: where
did the seconds go — stepping envs, choosing actions, moving data between processes, learning, or the
harness and start-up.

Each sample is put in one stage by its stack, first rule that matches:
  ipc         the leaf is in inter-process communication or serialization (multiprocessing connections,
              queues and locks, pickle, select/socket, Ray's object store calls): sending, receiving, waiting
  setup       any frame is the import machinery (start-up, spawn, lazy imports), or the cell process is
              outside the measurement protocol (opening and closing the session)
  env         any frame is an env's code (gymnasium envs and wrappers, ALE, EnvPool, MuJoCo, gymnax, Brax,
              rlbench's synthetic env)
  learner     any frame is autograd or an optimizer, or a non-stdlib function named like an update
              (backward, learn, update, train, loss)
  inference   any frame is a torch module's forward or rlbench's policies (choosing actions)
  harness     the leaf is in rlbench's core (timing, protocol, cell process)
  other       everything else (adapter glue, numpy, native frames)
Weights are py-spy's seconds of samples, summed over all processes and threads of the cell, so a
2-worker cell can hold more seconds than its wall time.
"""
import json
import re

STAGES = ("env", "inference", "learner", "ipc", "harness", "other", "setup")

_IPC_FILES = re.compile(r"multiprocessing/(connection|queues|reduction|synchronize|shared_memory|managers|"
                        r"resource_sharer|popen_\w+|process)\.py$|/(pickle|copyreg|selectors|socket|"
                        r"threading|queue)\.py$|ray/_private/(worker|serialization)\.py$|ray/_raylet")
_ENV_FILES = re.compile(r"gymnasium/(envs|wrappers|core\.py|vector/utils)|ale_py/|envpool/|mujoco/|gymnax/|"
                        r"brax/envs|rlbench/synthetic\.py|rlbench/envs\.py")
_LEARN_FILES = re.compile(r"torch/(autograd/(?!grad_mode)|optim/)")
_STDLIB = re.compile(r"/lib/python3\.\d+/(?!site-packages/)")
_LEARN_NAMES = re.compile(r"(^|[._])(backward|learn|update|train|loss)", re.IGNORECASE)
_INFER_FILES = re.compile(r"torch/nn/|rlbench/policy\.py$|adapters/torch_mlp\.py$")
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
