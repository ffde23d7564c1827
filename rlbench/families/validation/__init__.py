"""Validation: the cells of a run that match a published figure (EnvPool's, gymnax's, the baselines'), with
the measured value, the published one and a verdict per check."""
from rlbench.contract import Family


class Validation(Family):
    name = "validation"
    order = 60

    def exports(self, results, out_dir: str) -> dict:
        from rlbench.families.validation.report import validation_csv
        return validation_csv(results)

    def section(self, results, out_dir: str) -> str:
        from rlbench.families.validation.report import validation_section
        return validation_section(results)
