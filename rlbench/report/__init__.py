"""Exporters, as hyperfine has them: each renders its files of a ResultSet (name -> text), and one writer
(rlbench.report.writer) writes them: the CSVs, each family's own files, the py-spy profiles' table, then
the page."""


def exporters() -> list:
    from rlbench.report.csv_reporter import export_csv
    from rlbench.report.html import export_families, export_html
    from rlbench.report.profiles import export_profiles
    return [export_csv, export_families, export_profiles, export_html]


def export(results, out_dir: str, chosen=None) -> list:
    """Every exporter's files (or just `chosen`'s), written by the one writer; the paths."""
    from rlbench.report.writer import write_files
    return [path for render in (chosen or exporters()) for path in write_files(out_dir, render(results, out_dir))]
