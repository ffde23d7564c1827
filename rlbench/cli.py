"""`rlbench`: the command line, built from the commands' requests (rlbench.commands), and the dispatch: parse,
build the command's request, call its handler; a usage error is one line and exit code 2."""
import argparse
import os
import re
import sys
from dataclasses import MISSING, fields

from rlbench.commands import commands
from rlbench.errors import UsageError
from rlbench.planning.request import flag_of


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit code 2, like every other bad input
        raise UsageError(f"{self.prog}: {message}")


def _add_flags(parser, command) -> None:
    """The flags of the command's request's fields (those it takes), in field order, as each field declares its
    own (rlbench.planning.request.flag): the flag and the value it fills are one declaration."""
    for f in fields(command.request):
        flag = flag_of(f)
        if not command.takes(f):
            continue
        kw = {"help": flag["help"], **flag["argparse"]}
        if f.type is bool:
            kw.setdefault("action", "store_true")
        elif f.type is tuple and not flag["positional"] and "nargs" not in kw:   # nargs: one flag, many values
            kw.setdefault("action", "append")
        elif f.type in (int, float):
            kw.setdefault("type", f.type)
        if f.default is not MISSING:
            kw["default"] = list(f.default) if isinstance(f.default, tuple) else f.default
        if flag["positional"]:
            parser.add_argument(f.name, **kw)
        else:
            parser.add_argument(flag["name"] or "--" + f.name.replace("_", "-"), dest=f.name,
                                required=f.default is MISSING, **kw)


def parse_args(argv):
    """argparse's Namespace: `command` (and `verb` for a group's sub-command) and the request's fields."""
    p = _Parser(prog="rlbench", description="Compare RL parallelism strategies on this machine.")
    sub = p.add_subparsers(dest="command", required=True)
    for command in commands().values():
        parser = sub.add_parser(command.name, help=command.help, description=command.help)
        if command.verbs:
            verbs = parser.add_subparsers(dest="verb", required=True)
            for verb in command.verbs:
                _add_flags(verbs.add_parser(verb.name, help=verb.help, description=verb.help), verb)
        else:
            _add_flags(parser, command)
    return p.parse_args(argv)


def request_of(args):
    """(the command's handler, its request) from parse_args' result."""
    command = commands()[args.command]
    if command.verbs:
        command = next(v for v in command.verbs if v.name == args.verb)
    return command.handler, command.request.from_flags(args)


def main(argv=None) -> int:
    if os.getcwd() not in sys.path and "" not in sys.path:  # a user's env or policy module imports from here,
        sys.path.insert(0, os.getcwd())                      # as under `python -m` (and in every cell)
    try:
        handler, request = request_of(parse_args(argv))
        return handler(request)
    except UsageError as exc:  # one line, whatever a user's module put in its exception's text
        print("rlbench: error: " + re.sub(r"\s*\n\s*", " ", str(exc).strip()), file=sys.stderr)
        return 2
    except BrokenPipeError:  # `rlbench list | head`: the reader has gone; say no more (Python's documented way)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell tool ends


if __name__ == "__main__":
    sys.exit(main())
