"""`tune` (rlbench.tuning: the race and its answer) and `calibrate` (each strategy's cost per env step here,
cached for tune's predictions)."""
import time
from dataclasses import dataclass

from rlbench.commands.command import Command
from rlbench.machine.limits import positive_int
from rlbench.planning.request import Request, TuneRequest, adapters, flag, names


def tune(request: TuneRequest) -> int:
    from rlbench.tuning import tune as race
    return race(request)[0]


@dataclass(frozen=True)
class CalibrateRequest(Request):
    adapters: tuple = adapters("only these adapters (default: every env-stepping adapter available here)")
    max_envs: int = flag("largest num_envs calibrated: each adapter is calibrated at 8 envs per core, within this "
                         "(default 4096)", 4096, type=positive_int)
    force: bool = flag("measure again what the cache holds", False)


def calibrate(request: CalibrateRequest) -> int:
    """Each strategy's env steps/s on the zero-cost synthetic env, cached for `rlbench tune`'s predictions: run
    ahead, a first tune reads it instead of calibrating (which it does apart from its budget). A strategy whose
    cells failed or outlived their bound is listed with the reason: tune races it without a prediction."""
    from rlbench.report.format import rate
    from rlbench.tuning import calibrate, prepare
    from rlbench.tuning.candidates import Space, cpus_here
    from rlbench.workload import PolicySpec, Workload
    cell_s, startup_s = calibrate.bounds()
    cpus = cpus_here()
    space = Space(Workload(calibrate.ENV_ID, 1, PolicySpec()), names(request.adapters), request.max_envs, cpus)
    ns = calibrate.sizes(cpus, request.max_envs)
    envs = prepare(space.adapters)
    t0 = time.monotonic()
    figures, path, rows = calibrate.calibrate(space.adapters, ns, envs, force=request.force, by="rlbench calibrate")
    took = time.monotonic() - t0
    for adapter in space.adapters:
        cells = ", ".join(f"n={n}: {rate(getattr(figures.at(adapter, n), 'steps_per_s', None))}" for n in ns)
        why = figures.failure(adapter)
        print(f"{adapter:<22} {cells}" + (f"  (no prediction: {why[:120]})" if why else ""))
    print(f"env steps/s on {calibrate.ENV_ID} (step_cost_us=0); {len(rows)} measured now in {took:.0f} s, each cell "
          f"within {cell_s:g} s ({cell_s + startup_s:g} s for one that starts a Ray cluster); cache: {path}")
    return 0


COMMANDS = (
    Command("tune", "race every strategy that can step this env here and recommend the fastest", TuneRequest, tune),
    Command("calibrate", "measure each strategy's cost per env step on this machine (cached; `rlbench tune` runs "
                         "what is missing)", CalibrateRequest, calibrate),
)
