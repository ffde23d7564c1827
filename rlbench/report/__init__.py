"""Reporters, as google/benchmark has them: each takes a ResultSet and writes one view of it through
rlbench.report.writer."""


def reporters():
    from rlbench.report.csv_reporter import CsvReporter
    from rlbench.report.html import HtmlReporter
    from rlbench.report.profiles import ProfilesReporter
    from rlbench.report.replay import ReplayReporter
    from rlbench.report.validation import ValidationReporter
    return [CsvReporter(), ValidationReporter(), ReplayReporter(), ProfilesReporter(), HtmlReporter()]
