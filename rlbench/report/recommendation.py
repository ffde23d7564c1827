"""The Recommendation section on top of a `rlbench tune` run's page: the decision env.json keeps (as
rlbench.tuning.decide made it), drawn; nothing is recomputed here."""
from rlbench.report.format import data_v, rate, speedup, with_ci
from rlbench.report.format import esc as _e


def recommendation_section(env: dict) -> str:
    tune = env.get("tune")
    if not tune:
        return ""
    win = tune.get("winner")
    parts = [f"<h2>Recommendation: {_e(tune.get('label', ''))}</h2>"]
    if not win:
        return "".join(parts) + f"<p>No answer: {_e(tune.get('why_none', ''))}</p>"
    parts.append(f"<p><b>{_e(win['config'])}</b>: {rate(win['steps_per_s'])} env steps/s "
                 f"[95% CI {rate(win['ci_low'])}, {rate(win['ci_high'])}], n={win['n']}")
    sp = tune.get("speedup_over_serial")
    if sp:
        parts.append(f"; {speedup(sp['ratio'], sp['ci_low'], sp['ci_high'])} the serial loop "
                     f"({_e(sp['baseline'])})")
    up = tune.get("runner_up")
    if up:
        parts.append(f". Runner-up {_e(up['config'])} at {speedup(up['ratio'], up['ci_low'], up['ci_high'])} of it: "
                     f"the lead is {_e(up['lead'])}")
    parts.append(".</p>")
    if tune.get("note"):
        parts.append(f"<p>Note: {_e(tune['note'])}.</p>")
    code = "\n".join(filter(None, [win.get("snippet"), win.get("command")]))
    parts.append(f"<pre>{_e(code)}</pre>")
    rows = "".join(
        f"<tr><td>{_e(s['adapter'])}</td><td>{_e(s.get('config', ''))}</td>"
        f"<td data-v='{data_v(s.get('steps_per_s'))}'>{rate(s['steps_per_s']) if s.get('steps_per_s') else ''}</td>"
        f"<td data-v='{data_v(s.get('ratio_to_winner'))}'>{of_winner(s)}</td>"
        f"<td>{_e(s['why'])}</td></tr>" for s in tune.get("strategies", []))
    head = "".join(f"<th>{h}</th>" for h in ("strategy", "its best configuration", "env steps/s",
                                             "of the winner [95% CI]",
                                             "why it lost"))
    parts.append(f"<table class='sortable'><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
    return "".join(parts)


def of_winner(strategy: dict) -> str:
    """A strategy's best rate as a multiple of the winner's with its bootstrap 95% CI ('0.67x [0.61, 0.72]');
    '[-]' when either side had fewer than 2 repeats (or a decision older than the CI); '' when it never ran."""
    value = strategy.get("ratio_to_winner")
    if value is None or value != value:
        return ""
    return with_ci(value, strategy.get("ratio_ci_low"), strategy.get("ratio_ci_high"), unit="x")
