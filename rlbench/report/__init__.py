"""Exporters: each reads the run's one view model (rlbench.report.view.RunView, built
once from the ResultSet) and renders its files, {name: bytes}; one writer (rlbench.report.writer) writes them:
the CSVs, each family's own files, the py-spy profiles' table, then the page."""
import sys


def exporters() -> list:
    """The page needs plotly (the report extra); where it is not installed (a bare GPU machine the device kit
    runs on) the tables are still written and `rlbench report DIR` makes the page wherever plotly is."""
    from rlbench.report import charts
    from rlbench.report.csv_reporter import export_csv
    from rlbench.report.family_files import export_families
    from rlbench.report.html import export_html
    from rlbench.report.profiles_section import export_profiles
    if not charts.available():
        print("rlbench: plotly is not installed here: CSVs written, no index.html (`rlbench report DIR` makes it "
              "where plotly is)", file=sys.stderr)
        return [export_csv, export_families, export_profiles]
    return [export_csv, export_families, export_profiles, export_html]


def export(results, out_dir: str, chosen=None) -> list:
    """Every exporter's files (or just `chosen`'s) of a ResultSet, rendered from one view and written by the
    one writer; the paths."""
    from rlbench.report.view import run_view
    from rlbench.report.writer import write_files
    view = run_view(results, out_dir)
    return [path for render in (chosen or exporters()) for path in write_files(out_dir, render(view))]
