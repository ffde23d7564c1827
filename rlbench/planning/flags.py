"""What to run, from the command line: a suite file with the flags that override its protocol, or one
sweep described by flags alone (--adapter/--env/--num-envs/...). Either way, a Suite of cells."""
import fnmatch
import sys
from dataclasses import replace

from rlbench import registry
from rlbench.errors import UsageError
from rlbench.planning.plan import Settings
from rlbench.planning.suite import Suite, load_suite, make_cell, merge_duplicates, parse_settings
from rlbench.workload import Workload, parse_policy

FLAG_NAMES = {"repeats": "--repeats", "seed_per_repeat": "--seeds", "duration_s": "--duration", "warmup_s": "--warmup",
              "timeout_s": "--timeout",
              "stop_ci_width": "--stop-ci-width", "min_duration_s": "--min-duration",
              "ray_address": "--ray-address", "cluster": "--cluster", "node_class": "--node-class"}


def plan_from_args(args) -> Suite:
    """args: rlbench.planning.request.RunRequest."""
    if args.suite and args.adapter:
        raise UsageError("give either a suite file or --adapter/--env, not both")
    if args.suite:
        suite = load_suite(args.suite, args.suite_text)
    elif args.adapter and args.env:
        suite = suite_from_flags(args)
    else:
        raise UsageError("rlbench run needs a suite file or --adapter NAME --env ID")
    if args.seeds is not None and args.repeats is not None and args.seeds != args.repeats:
        raise UsageError(f"--seeds {args.seeds} runs {args.seeds} repeats, one per seed: leave out --repeats "
                         f"{args.repeats}")
    seeds = (("repeats", args.seeds), ("seed_per_repeat", True)) if args.seeds is not None else ()
    overrides = {k: v for k, v in (("repeats", args.repeats), *seeds, ("duration_s", args.duration),
                                   ("warmup_s", args.warmup), ("stop_ci_width", args.stop_ci_width),
                                   ("min_duration_s", args.min_duration),
                                   ("timeout_s", args.timeout), ("ray_address", args.ray_address),
                                   ("cluster", args.cluster), ("node_class", args.node_class))
                 if v is not None}
    settings = parse_settings("command line", overrides, suite.settings, FLAG_NAMES)
    cells = tuple(replace(c, protocol=tuple((k, v) for k, v in c.protocol if k not in overrides))
                  for c in suite.cells)  # the command line beats a sweep's own [protocol]
    if args.only:
        cells = tuple(c for c in cells if any(fnmatch.fnmatchcase(c.cell_id, g) for g in args.only))
        if not cells:
            raise UsageError(f"--only {' '.join(args.only)} matches no cell (e.g. {suite.cells[0].cell_id})")
    for cell_id in suite.duplicates:
        print(f"rlbench: warning: cell {cell_id} is given more than once; it runs once", file=sys.stderr)
    return replace(suite, settings=settings, cells=cells)




def suite_from_flags(args) -> Suite:
    from rlbench.envs import planned_env_kwargs, wrapped_id
    try:
        sizes = [int(n) for n in args.num_envs.split(",")]
    except ValueError:
        raise UsageError(f"--num-envs {args.num_envs!r} must be comma-separated integers, e.g. 1,4,16") from None
    if any(n < 1 for n in sizes):
        raise UsageError(f"--num-envs {args.num_envs!r}: every size must be >= 1")
    policy = parse_policy(args.policy)
    options, env_kwargs = pairs("--opt", args.opt), pairs("--env-kwarg", args.env_kwarg)
    cells = []
    for env_id in (wrapped_id(e, args.env_wrapper) for e in args.env):
        try:
            kw, frameskip = planned_env_kwargs(env_id, env_kwargs, from_cli=True)
        except UsageError as exc:
            raise UsageError(f"--env-kwarg: {exc}" if env_kwargs else str(exc)) from None
        for name in args.adapter:
            registry.get(name)
            for n in sizes:
                cells.append(make_cell("--opt", name, Workload(env_id, n, policy, 0, frameskip, kw), options))
    cells, duplicates = merge_duplicates(cells)
    return Suite("adhoc", None, None, Settings(), cells, duplicates=duplicates)




def pairs(flag, items) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{flag} {item!r} must be KEY=VALUE")
        out[key] = value
    return out
