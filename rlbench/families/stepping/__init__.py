"""Env stepping: vector envs, samplers, Ray actors and compiled env loops stepping envs with a policy,
compared on env steps/s at the same workload."""
from rlbench.contract import Family


class Stepping(Family):
    name = "stepping"
    order = 10
    kinds = ("vector_env", "runner")
    races = ("vector_env",)  # runners train as well: their env steps/s do not compete with a sampler's

    def section(self, results, out_dir: str) -> str:
        from rlbench.families.stepping.report import stepping_section
        return stepping_section(results, self.kinds)

    def headlines(self, results) -> list:
        from rlbench.families.stepping.report import headlines
        return headlines(results)
