"""Learners: actor-learner architectures (IMPALA, SEED, A3C, DDP, rlpyt's runners, PPO trainers), one unit
one learner update, reporting updates/s, samples/s, policy lag and where the time went."""
from rlbench.contract import Family


class Learners(Family):
    name = "learners"
    order = 30
    kinds = ("learner",)
    info_keys = ("policy_lag_hist",)  # [batches at lag 0, at lag 1, ...] over the timed window

    def section(self, results, out_dir: str) -> str:
        from rlbench.families.learners.report import learners_section
        return learners_section(results, self.kinds)
