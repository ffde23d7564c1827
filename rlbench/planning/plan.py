"""Expanded cells and the order their repeats run in.

A cell is one point of a sweep (adapter, env, num_envs, policy, options); a job is one repeat of
one cell. Repeats of different cells are interleaved (round-robin), so slow drift of the machine
spreads over all cells instead of biasing whichever ran last.
"""
from dataclasses import dataclass, field, fields, replace

from rlbench.workload import Workload, kv_label


@dataclass(frozen=True)
class TimingProtocol:
    """What one repeat's timed window needs (rlbench.running.timing.measure): a warm-up of at least
    warmup_s and warmup_units, then units until both duration_s and min_units are reached. With
    stop_ci_width > 0, duration_s is the longest window: it closes as soon as it has min_units, lasted
    min_duration_s (at most duration_s) and its rate is stable: the 95% CI of the median of its ten
    blocks' rates spans at most stop_ci_width of that median. With until_target, a learner's window also closes
    once its session says it reached its target return (`reached()`): duration_s is then the most a run trains
    (`rlbench tune --train` races time to a return, and a run past it is budget spent on nothing)."""
    warmup_s: float = 0.2
    warmup_units: int = 2
    duration_s: float = 1.0
    min_units: int = 10
    stop_ci_width: float = 0.0
    min_duration_s: float = 0.0
    until_target: bool = False


@dataclass(frozen=True)
class Settings(TimingProtocol):
    """How every cell of a run is measured (suite [protocol] table, CLI overrides): the in-process
    protocol plus what the runner applies around it."""
    repeats: int = 3
    timeout_s: float = 120.0
    omp_threads: int = 1
    affinity: tuple = ()
    seed: int = 0
    seed_per_repeat: bool = False  # each repeat its own seed, seed + its index (--seeds N): learning over seeds
    ray_address: str = ""   # an existing Ray cluster for Ray-based adapters (RAY_ADDRESS); "" = local
    cluster: str = ""       # run the cells on this Ray cluster's nodes (rlbench.running.cluster); "" = here
    node_class: str = ""    # which class of identical nodes (its id); "" = the largest
    cores: int = 0          # on a cluster, the cores a cell reserves; 0 = a whole node, as alone on a machine
    exclusive: bool = False  # on a cluster, the whole node reserved even when the cell pins fewer cores

    def protocol(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(TimingProtocol)}


@dataclass(frozen=True)
class Cell:
    adapter: str
    workload: Workload
    options: dict = field(default_factory=dict)        # resolved, typed
    given_options: dict = field(default_factory=dict)  # what the user set (labels)
    index: int = 0                                      # position in the suite (report order)
    omp_threads: int = None                             # sweep axis; None = the suite's [protocol] value
    affinity: tuple = None                              # CPUs the cell may use; None = [protocol] value
    protocol: tuple = ()                                # (key, value) pairs of its sweep's own [protocol]

    @property
    def cell_id(self) -> str:
        w = self.workload
        env = w.env_id + (f"({kv_label(w.env_kwargs)})" if w.env_kwargs else "")
        opts = f"/{kv_label(self.given_options)}" if self.given_options else ""
        cpu = (f"/omp={self.omp_threads}" if self.omp_threads is not None else "") + \
            (f"/cpus={'+'.join(map(str, self.affinity))}" if self.affinity is not None else "")
        return f"{self.adapter}/{env}/n={w.num_envs}/{w.policy.label}{opts}{cpu}"

    def threads(self, settings: Settings) -> int:
        return settings.omp_threads if self.omp_threads is None else self.omp_threads

    def cpus(self, settings: Settings) -> tuple:
        return settings.affinity if self.affinity is None else self.affinity

    def settings(self, settings: Settings) -> Settings:
        """The run's settings with this cell's sweep-level protocol (durations, timeout) applied."""
        return replace(settings, **dict(self.protocol)) if self.protocol else settings

    def seed(self, settings: Settings, repeat: int) -> int:
        """The seed a repeat runs: the suite's, or with seed_per_repeat its own (seed + repeat), so that the
        repeats of a training cell are its seeds and their median and CI are over seeds."""
        return self.workload.seed + (repeat if self.settings(settings).seed_per_repeat else 0)

    def spec(self, settings: Settings, repeat: int) -> dict:
        """The JSON the cell process receives."""
        workload = {**self.workload.to_dict(), "seed": self.seed(settings, repeat)}
        return {"adapter": self.adapter, "options": self.options, "workload": workload,
                "protocol": self.settings(settings).protocol(), "affinity": list(self.cpus(settings)),
                "repeat": repeat, "cell_id": self.cell_id}


@dataclass(frozen=True)
class Job:
    cell: Cell
    repeat: int
    profile: bool = False




def interleave(cells, repeats: int, profile: bool = False) -> list:
    jobs = [Job(c, r) for r in range(repeats) for c in cells]
    if profile:  # one extra run per cell under py-spy, kept out of the statistics
        jobs += [Job(c, repeats, profile=True) for c in cells]
    return jobs
