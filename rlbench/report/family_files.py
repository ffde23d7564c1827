"""Each family's own files (replay.csv, validation.csv): a family's exports hook gives text
(rlbench.contract.Family.exports); it is made bytes here, the one place they are collected."""
from rlbench import registry
from rlbench.report.writer import as_bytes


def export_families(view) -> dict:
    return {name: as_bytes(content) for f in registry.families()
            for name, content in f.exports(view.results, view.out_dir).items()}
