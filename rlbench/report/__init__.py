"""Reporters, as google/benchmark has them: each takes a ResultSet and writes one view of it through
rlbench.report.writer: the CSVs, each family's own files, the py-spy profiles' table, then the page."""


def reporters():
    from rlbench.report.csv_reporter import CsvReporter
    from rlbench.report.html import FamilyExports, HtmlReporter
    from rlbench.report.profiles import ProfilesReporter
    return [CsvReporter(), FamilyExports(), ProfilesReporter(), HtmlReporter()]
