"""`rlbench`: the command line, its arguments and which command runs (rlbench.commands does it)."""
import argparse
import os
import re
import sys
from dataclasses import MISSING, fields

import rlbench
from rlbench import commands
from rlbench.commands import VALIDATE_SUITE
from rlbench.errors import UsageError
from rlbench.machine.limits import DEFAULTS as LIMIT_DEFAULTS
from rlbench.machine.limits import positive_int
from rlbench.planning.request import RunRequest, TuneRequest, flag_of
from rlbench.results.history import DEFAULT_DB
from rlbench.running.rundir import REPORTS


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit code 2, like every other bad input
        raise UsageError(f"{self.prog}: {message}")


def _add_flags(parser, request, keep=lambda f: True) -> None:
    """The flags of a request's fields that `keep` accepts, in field order, as each field declares its own
    (rlbench.planning.request.flag): the flag and the value it fills are one declaration."""
    for f in fields(request):
        flag = flag_of(f)
        if flag is None or not keep(f):
            continue
        kw = {"help": flag["help"], **flag["argparse"]}
        if f.type is bool:
            kw.setdefault("action", "store_true")
        elif f.type is tuple:
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
    p = _Parser(prog="rlbench", description="Compare RL parallelism strategies on this machine.")
    sub = p.add_subparsers(dest="command", required=True)
    common = _Parser(add_help=False)   # what `run` and `validate` share: the protocol, the cluster, the folder
    _add_flags(common, RunRequest, lambda f: flag_of(f)["validate"])
    run = sub.add_parser("run", parents=[common], help="run a suite file, or one sweep given by flags")
    _add_flags(run, RunRequest, lambda f: not flag_of(f)["validate"])
    res = sub.add_parser("resume", help="finish an interrupted run: only the (cell, repeat) pairs missing from DIR")
    res.add_argument("dir", metavar="DIR")
    res.add_argument("--no-build", action="store_true", help="never build an adapter's own environment")
    res.add_argument("--allow-errors", action="store_true", help="exit 0 even with error or timeout rows")
    rer = sub.add_parser("rerun", help="run the plan kept in DIR again, from scratch, into a new folder")
    rer.add_argument("dir", metavar="DIR")
    _add_flags(rer, RunRequest, lambda f: f.name == "out")
    rer.add_argument("--no-build", action="store_true", help="never build an adapter's own environment")
    rer.add_argument("--allow-errors", action="store_true", help="exit 0 even with error or timeout rows")
    sub.add_parser("list", help="adapters, their options, and whether they can run here")
    rep = sub.add_parser("report", help="rebuild results.csv, summary.csv and index.html from results.jsonl")
    rep.add_argument("dir")
    rep.add_argument("--format", choices=("html", "pytest-benchmark"), default="html",
                     help="html: results.csv, summary.csv, index.html and the other views (default); "
                          "pytest-benchmark: only DIR/pytest-benchmark.json, for `pytest-benchmark compare`")
    tun = sub.add_parser("tune", help="race every strategy that can step this env here and recommend the fastest")
    _add_flags(tun, TuneRequest)
    cal = sub.add_parser("calibrate", help="measure each strategy's cost per env step on this machine (cached; "
                                           "`rlbench tune` runs what is missing)")
    cal.add_argument("--adapters", action="append", metavar="A,B", help="only these adapters (default: every "
                                                                        "env-stepping adapter available here)")
    cal.add_argument("--max-envs", type=positive_int, default=4096, help="largest num_envs calibrated (default: "
                                                                         "8 per core)")
    cal.add_argument("--force", action="store_true", help="measure again what the cache holds")
    sub.add_parser("env", help="print this machine's fingerprint (env.json)")
    cmp = sub.add_parser("compare", help="compare two runs; exit 1 when a cell is slower beyond the threshold "
                                         "and significantly so")
    cmp.add_argument("base", metavar="BASE_DIR")
    cmp.add_argument("new", metavar="NEW_DIR")
    cmp.add_argument("--threshold", default="10%", help="relative slowdown that counts (default 10%%)")
    cmp.add_argument("--alpha", type=float, default=0.05, help="significance level of the U test (default 0.05)")
    cmp.add_argument("--out", help="where compare.csv and compare.html go (default NEW_DIR)")
    envs = sub.add_parser("envs", help="adapters' own environments (Sample Factory, Reverb, Brax, RLlib): state, "
                                       "or build")
    envs.add_argument("names", nargs="*", metavar="NAME", help="environment names (default: all)")
    envs.add_argument("--build", action="store_true", help="build the ones not built yet (make install-extras)")
    envs.add_argument("--jobs", type=int, default=0, metavar="N",
                      help="builds at once (default: one per environment, at most the CPUs + 1: pip waits on the "
                           "network and the disk as much as on a core)")
    val = sub.add_parser("validate", parents=[common], help=f"run {VALIDATE_SUITE} and compare with published figures")
    val.add_argument("--from", dest="from_dir", metavar="DIR", nargs="+",
                     help="judge existing runs instead of running (several runs of one machine: the claims matrix "
                          "over all of them)")
    val.add_argument("--claims-out", metavar="DIR", help="where claims.csv and claims.md go (default: the run's "
                                                          "folder, the first of --from)")
    lim = sub.add_parser("limits", help="measure memory-copy and cold disk-read limits (what replay figures are "
                                        "fractions of)")
    lim.add_argument("--out-dir", default=REPORTS, help="measure reads on this directory's filesystem "
                                                        "(default reports/)")
    lim.add_argument("--memcpy-mb", type=positive_int, default=LIMIT_DEFAULTS["memcpy_mb"], help="MiB per copy buffer")
    lim.add_argument("--disk-mb", type=positive_int, default=LIMIT_DEFAULTS["disk_mb"], help="MiB of the scratch file")
    lim.add_argument("--repeats", type=positive_int, default=LIMIT_DEFAULTS["repeats"], help="runs per figure (median)")
    _history_parser(sub)
    bis = sub.add_parser("bisect", help="the first commit between --good and --bad, or the first released version "
                                        "of --package, at which CELL got slower (each commit measured in a git "
                                        "worktree, each version in its own environment; every run added to the "
                                        "history)")
    bis.add_argument("suite", metavar="SUITE")
    bis.add_argument("cell", metavar="CELL", help="the cell's id (rlbench run --only)")
    bis.add_argument("--good", help="a commit at which the cell was fast")
    bis.add_argument("--bad", help="a later commit at which it is slow")
    bis.add_argument("--package", help="bisect this library's released versions instead of commits")
    bis.add_argument("--versions", metavar="FIRST..LAST", help="with --package: the fast version and a later slow "
                                                               "one, e.g. 1.0.0..1.3.0")
    bis.add_argument("--repo", default=rlbench.ROOT, help="the project checkout whose commits are measured "
                                                          "(default: this rlbench's)")
    bis.add_argument("--repeats", type=positive_int, help="repeats per run (default: the suite's)")
    bis.add_argument("--duration", type=float, help="timed seconds per repeat (default: the suite's)")
    bis.add_argument("--alpha", type=float, default=0.05, help="the ends must differ at this level (default 0.05)")
    bis.add_argument("--out", help="where the runs go, a new or empty folder (default reports/bisect/<time>)")
    bis.add_argument("--db", default=os.environ.get("RLBENCH_HISTORY", DEFAULT_DB), help="the history file")
    return p.parse_args(argv)


def _history_parser(sub) -> None:
    his = sub.add_parser("history", help="the benchmark history across commits and machines: add runs, show "
                                         "each cell's series and change points, gate a new run on it")
    verbs = his.add_subparsers(dest="history_command", required=True)
    db = _Parser(add_help=False)
    db.add_argument("--db", default=os.environ.get("RLBENCH_HISTORY", DEFAULT_DB),
                    help=f"the history file (default $RLBENCH_HISTORY, else {DEFAULT_DB})")
    add = verbs.add_parser("add", parents=[db], help="add run folders (and every run under a folder); idempotent")
    add.add_argument("dirs", nargs="+", metavar="RUN_DIR")
    add.add_argument("--tag", help="a label kept with these runs (an A/A series, an injected slowdown)")
    show = verbs.add_parser("show", parents=[db], help="history-SUITE.html and .csv: each cell's series over "
                                                      "commits, its change points and the open regressions")
    show.add_argument("--suite", help="only this suite (default: every suite in the history)")
    show.add_argument("--machine", help="only this machine class (its id, or a part of its label)")
    show.add_argument("--alpha", type=float, default=0.05, help="significance of a change point (default 0.05)")
    show.add_argument("--out", default=os.path.join(REPORTS, "history"), help="where the pages go")
    chk = verbs.add_parser("check", parents=[db], help="is RUN_DIR a significant change against the history? "
                                                      "exit 1 when a cell is slower")
    chk.add_argument("dir", metavar="RUN_DIR")
    chk.add_argument("--threshold", default="2%", help="smallest slowdown that counts (default 2%%)")
    chk.add_argument("--alpha", type=float, default=0.05, help="false-alarm rate over the run's cells (default 0.05)")
    chk.add_argument("--window", type=positive_int, default=20, help="runs since the last change that set the "
                                                                     "level (default 20)")
    chk.add_argument("--confirm", action="store_true", help="run the cells found slower again (RUN_DIR's plan, "
                                                            "only them) and keep only those slower twice")
    chk.add_argument("--add", action="store_true", help="add RUN_DIR to the history after checking it")
    chk.add_argument("--out", help="where history-check.csv goes (default RUN_DIR)")


COMMANDS = {"run": commands.cmd_run, "resume": commands.cmd_resume, "rerun": commands.cmd_rerun,
            "tune": commands.cmd_tune, "calibrate": commands.cmd_calibrate, "list": commands.cmd_list,
            "report": commands.cmd_report,
            "compare": commands.cmd_compare, "validate": commands.cmd_validate, "envs": commands.cmd_envs,
            "env": commands.cmd_env, "limits": commands.cmd_limits, "history": commands.cmd_history,
            "bisect": commands.cmd_bisect}


def main(argv=None) -> int:
    if os.getcwd() not in sys.path and "" not in sys.path:  # a user's env or policy module imports from here,
        sys.path.insert(0, os.getcwd())                      # as under `python -m` (and in every cell)
    try:
        args = parse_args(argv)
        return COMMANDS[args.command](args)
    except UsageError as exc:  # one line, whatever a user's module put in its exception's text
        print("rlbench: error: " + re.sub(r"\s*\n\s*", " ", str(exc).strip()), file=sys.stderr)
        return 2
    except BrokenPipeError:  # `rlbench list | head`: the reader has gone; say no more (Python's documented way)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell tool ends


if __name__ == "__main__":
    sys.exit(main())
