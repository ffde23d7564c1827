"""`rlbench`'s commands, one module per group, as asv keeps its own: run (run, resume, rerun, validate, report),
tune (tune, calibrate), compare, history (add, show, check), bisect and info (list, env, envs, limits).

A command is a `Command` (rlbench.commands.command): its name and help, the frozen request its flags fill (each
flag a field, declared once with `rlbench.planning.request.flag`; a flag several commands take is one function,
called by each request) and the handler that does the work with that request. rlbench.cli builds the parser from
`commands()` and dispatches; nothing here reads argparse's Namespace. A new group is a module with its COMMANDS,
added below."""


def commands() -> dict:
    """name -> Command, in the order `rlbench --help` lists them."""
    from rlbench.commands import bisect, compare, history, info, run, tune
    groups = (run, tune, compare, history, bisect, info)
    return {c.name: c for group in groups for c in group.COMMANDS}
