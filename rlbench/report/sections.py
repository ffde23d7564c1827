"""The report's sections as plug-ins: index.html is its title, then every `Section` of `sections()` in order.
A new section is one entry here (or a family's, rlbench.contract.Family.section, found through
rlbench.registry), never an edit of the page (rlbench.report.html).

Orders: the page's top (tune's Recommendation, then the run's answer, then what the run was) is negative, so a
family at any order >= 0 (rlbench.contract.Family.order: stepping 10 ... validation 60) lands below the answer;
the page's foot (the summary table, the cells not run, the machine) comes after any family."""
from dataclasses import dataclass
from typing import Callable

from rlbench import registry
from rlbench.report.page_sections import about_run, dropped_note, headlines_box, machine_table, not_run, summary_table
from rlbench.report.profiles_section import profiles_section
from rlbench.report.recommendation import recommendation_section
from rlbench.report.train_recommendation import train_recommendation_section


@dataclass(frozen=True)
class Section:
    """One part of the page: render(view) gives its HTML from the run's view (rlbench.report.view.RunView),
    '' when the run has nothing of it."""
    name: str
    order: float    # lower first; ties by name
    render: Callable


PROFILES_ORDER = 50  # the py-spy profiles: after the families' own sections, before validation's

PAGE = (
    Section("recommendation", -30, lambda view: recommendation_section(view.record.tune)),
    Section("training recommendation", -29, lambda view: train_recommendation_section(view.record.train_tune)),
    Section("headlines", -20, lambda view: headlines_box(view.headlines)),
    Section("about", -10, lambda view: about_run(view.record)),
    Section("profiles", PROFILES_ORDER, profiles_section),
    Section("summary", 1000, lambda view: summary_table(view.ran)),
    Section("not run", 1010, lambda view: not_run(view.skipped)),
    Section("dropped", 1020, lambda view: dropped_note(view.dropped)),
    Section("machine", 1030, lambda view: machine_table(view.env)),
)


def family_section(family) -> Section:
    """A family's section (rlbench.contract.Family.section, drawn from the ResultSet and the run directory)
    at the family's order."""
    return Section(family.name, family.order, lambda view: family.section(view.results, view.out_dir))


def sections() -> list:
    """Every section of the page, in page order: the page's own and each family's."""
    return sorted([*PAGE, *(family_section(f) for f in registry.families())], key=lambda s: (s.order, s.name))
