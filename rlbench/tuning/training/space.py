"""The configurations `rlbench tune --train ALGO` races: every learner of the algorithm (rlbench.contract.Adapter.algo)
that can train the env here, crossed with the settings its tune_space names (the vector env underneath, workers)
and the num_envs sizes. Each trains on its learner's own recipe per env step: the rollout length per env is the
recipe's, so the batch is rollout length x envs, with the same epochs and minibatches per batch (CleanRL's and
PureJaxRL's rule when num_envs changes); the recipe of each is recorded beside it. What cannot race is kept with
the reason, as the stepping tune keeps it (rlbench.tuning.candidates.Left)."""
from dataclasses import dataclass, replace

from rlbench import registry
from rlbench.errors import UsageError
from rlbench.tuning.candidates import Left, admitted, config, raceable
from rlbench.workload import kv_label, placed

PER_CORE = (2, 4, 8)   # default num_envs: this many envs per core (2 cores: 4, 8, 16)


def algorithms() -> dict:
    """algo -> the learners that train it, every learner registered."""
    out = {}
    for name, cls in sorted(registry.discover().items()):
        if cls.kind == "learner" and cls.algo:
            out.setdefault(cls.algo, []).append(name)
    return out


def learners(algo: str, named=None) -> list:
    """The learners of `algo` to race: those named (--adapters; each must train it), else every one."""
    every = algorithms()
    if algo not in every:
        raise UsageError(f"--train {algo!r}: no learner trains it (valid: {', '.join(sorted(every))})")
    if named:
        for name in named:
            if name not in every[algo]:
                raise UsageError(f"--adapters: '{name}' does not train {algo} (valid: {', '.join(every[algo])})")
        return list(dict.fromkeys(named))
    return every[algo]


def learner_devices(policy) -> tuple:
    """(the devices the learners train on, why no other): the policy's own device, and the other of CPU and CUDA
    where the network can move (rlbench.workload.placed) and, for CUDA, this machine has an NVIDIA GPU. A learner
    that cannot use it (a CPU build of torch, JAX without its GPU backend) fails there with the reason, once."""
    from rlbench.machine.fingerprint import gpus
    own = policy.device_label
    other = "cpu" if own.startswith("cuda") else "cuda"
    if placed(policy, other) is None:
        return (own,), f"policy {policy.label} has no device to place"
    if other == "cuda" and not gpus():
        return (own,), "no NVIDIA GPU here: nvidia-smi lists none"
    return (own, other), ""


def default_sizes(cpus: int) -> tuple:
    return tuple(sorted({k * cpus for k in PER_CORE}))


SHAPE_OPTIONS = ("num_steps", "update_epochs", "num_minibatches", "unroll_length", "batch_size",
                 "num_updates_per_batch", "batch_T")   # the options recipe() spells out as the batch's shape


def recipe(cell, given=()) -> str:
    """What a configuration trains with, per the learner's recipe: rollout length x envs = batch, and the
    passes over each batch (its option names where it has them); then the options of `given` (--opt) it has not
    spelled out."""
    o, n = cell.options, cell.workload.num_envs
    if "num_steps" in o:
        shape = (f"{o['num_steps']} steps x {n} envs = batch {o['num_steps'] * n}, {o.get('update_epochs', 1)} "
                 f"epochs x {o.get('num_minibatches', 1)} minibatches")
    elif "unroll_length" in o:
        shape = (f"unroll {o['unroll_length']} x batch {o.get('batch_size')} x {o.get('num_minibatches', 1)} "
                 f"minibatches, {o.get('num_updates_per_batch', 1)} passes, {n} envs")
    elif "batch_T" in o:
        shape = f"{o['batch_T']} steps x {n} envs = batch {o['batch_T'] * n}"
    else:
        shape = f"{n} envs"
    rest = {k: o[k] for k in given if k not in SHAPE_OPTIONS}
    return shape + (f"; {kv_label(rest).replace(',', ', ')} (--opt)" if rest else "")


@dataclass(frozen=True)
class Config:
    """One configuration to race: its cell (the options given: its settings and the target), and its learning
    recipe's key: configurations of one learner and num_envs train on the same recipe, only the execution under it
    (the vector env, workers) differing. `shared`: the options every configuration is given alike (--opt, the target),
    named once in the answer's recipe and objective, not in every configuration's name."""
    cell: object
    recipe: str
    shared: tuple = ()

    @property
    def key(self) -> tuple:
        return self.cell.adapter, self.cell.workload.num_envs

    @property
    def config(self) -> str:
        return config(self.cell, self.shared)


class TrainSpace:
    """Learners of the algorithm x their tune_space settings x sizes; `left`: what cannot race, and why."""

    def __init__(self, workload, algo: str, named, sizes, cpus: int, target_return=None, recipe_options=None,
                 devices=None):
        """recipe_options: what every learner raced trains with (--opt), on top of its own recipe; devices: those
        the learners train on (learner_devices), the policy's own where None."""
        self.workload, self.algo, self.cpus = workload, algo, cpus
        self.devices = tuple(devices or (workload.policy.device_label,))
        self.recipe_options = dict(recipe_options or {})
        self.sizes = tuple(sorted(set(sizes))) if sizes else default_sizes(cpus)
        self.configs, self.left = [], []
        for name in learners(algo, named):
            if not admitted(name, named, self.left):
                continue
            cls = registry.get(name)
            if target_return is not None and not any(o.name == "target_return" for o in cls.options):
                self.left.append(Left(name, "", "unsupported", f"{name} does not time its run to a target return"))
                continue
            lacking = sorted(set(self.recipe_options) - {o.name for o in cls.options})
            if lacking:
                self.left.append(Left(name, "", "unsupported", f"its recipe has no option {', '.join(lacking)} "
                                      "(--opt): it cannot train on the same recipe"))
                continue
            self._add(cls, target_return)
        if not self.configs:
            raise UsageError(f"no learner of {algo} can train {workload.env_id} here: "
                             + "; ".join(f"{x.adapter}: {x.reason}" for x in self.left[:6]))

    def _add(self, cls, target_return) -> None:
        """The learner's configurations, its first setting on every device at every size, then its next, ...: what
        a budget cuts is its alternatives, not its sizes."""
        instance, seen = cls(), set()
        shared = (*self.recipe_options, *(["target_return"] if target_return is not None else []))
        order = sorted((variant, d, i, n, given) for i, n in enumerate(self.sizes)
                       for variant, given in enumerate(instance.tune_space(n, self.cpus))
                       for d in range(len(self.devices)))
        for _, d, _, n, given in order:
            given = {**self.recipe_options, **given,
                     **({"target_return": target_return} if target_return is not None else {})}
            own = self.devices[d] == self.workload.policy.device_label
            policy = self.workload.policy if own else placed(self.workload.policy, self.devices[d])
            workload = replace(self.workload, num_envs=n, policy=policy)
            cell = raceable(f"tune --train: {cls.name}", instance, workload, given, seen, self.left)
            if cell is not None:
                self.configs.append(Config(replace(cell, index=len(self.configs)), recipe(cell, self.recipe_options),
                                           shared))
