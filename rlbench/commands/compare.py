"""`compare BASE NEW`: the pairwise regression gate (rlbench.results.compare), its page and its exit code."""
from dataclasses import dataclass

from rlbench.commands import flags
from rlbench.commands.command import Command
from rlbench.planning.request import Request, flag


@dataclass(frozen=True)
class CompareRequest(Request):
    base: str = flag("the base run's folder", positional=True, metavar="BASE_DIR")
    new: str = flag("the new run's folder", positional=True, metavar="NEW_DIR")
    threshold: str = flags.threshold("10%")
    alpha: float = flags.alpha("significance level of the U test")
    out: str = flags.gate_out("NEW_DIR: compare.csv and compare.html")
    noise_from: tuple = flag("A/A runs of this machine (one suite run again at one commit): a change must also "
                             "clear their run-to-run spread (default: the 1%% floor)", (), name="--noise-from",
                             metavar="DIR", nargs="+")


def compare(request: CompareRequest) -> int:
    from rlbench.report import compare_page as compare_report
    from rlbench.report.view import CompareView
    from rlbench.results.compare import compare
    from rlbench.results.gate import exit_code, parse_threshold, ratio_label
    from rlbench.results.model import ResultSet
    threshold = parse_threshold(request.threshold)
    alpha = flags.checked_alpha(request.alpha)
    base, new = ResultSet.load(request.base), ResultSet.load(request.new)
    result = compare(base, new, threshold, alpha, _run_sd(request.noise_from))
    view = CompareView(result, request.base, request.new, base, new)
    paths = compare_report.write_view(view, request.out or request.new)
    for label, b, n, changed in view.winners:
        if changed:
            print(f"winner changed  {label}: base {b.winner.text}, new {n.winner.text}")
    for c in result.rows:
        if c.verdict != "same":
            ratio = ratio_label(c)
            print(f"{c.verdict:<15} {c.cell_id}  {c.reason or ''}" + (f"; new/base {ratio}" if ratio else ""))
    print(f"{len(result.rows)} cells: {result.counts_label}; "
          f"{len(result.regressions)} regression(s) beyond {threshold:.0%} at alpha {alpha:g} and a run-to-run "
          f"noise of {result.run_sd:.1%}")
    print(f"comparison: {paths[1]}")
    return exit_code(result.rows)


def _run_sd(noise_from) -> float:
    """The run-to-run noise of the A/A runs given (rlbench.results.changes.aa_noise), or the floor."""
    import os

    from rlbench.errors import UsageError
    from rlbench.results.changes import RUN_SD_FLOOR, aa_noise
    from rlbench.results.model import ResultSet
    for d in noise_from:
        if not os.path.isfile(os.path.join(d, "results.jsonl")):
            raise UsageError(f"compare --noise-from {d}: not a run folder (valid: folders holding results.jsonl)")
    return aa_noise([ResultSet.load(d) for d in noise_from]).sd if noise_from else RUN_SD_FLOOR


COMMANDS = (
    Command("compare", "compare two runs; exit 1 when a cell is slower beyond the threshold and significantly so",
            CompareRequest, compare),
)
