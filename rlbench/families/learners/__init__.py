"""Learners: actor-learner architectures (IMPALA, SEED, A3C, DDP, rlpyt's runners, PPO trainers), one unit
one learner update, reporting updates/s, samples/s, policy lag and where the time went."""
from rlbench.contract import Family
from rlbench.results.levels import env_level, inference_level
from rlbench.results.metrics import Metric


class Learners(Family):
    name = "learners"
    order = 30
    kinds = ("learner",)
    info_keys = ("policy_lag_hist",)  # [batches at lag 0, at lag 1, ...] over the timed window
    metrics = (  # every one reported by the sessions (Metrics.read) over the timed window
        Metric("updates_per_s", "updates/s", "optimiser updates per second", source="session"),
        Metric("replay_ratio", "ratio", "samples consumed by updates / env steps added", source="session"),
        Metric("policy_lag_mean", "versions", "parameter versions between acting and learning", source="session"),
        Metric("policy_lag_max", "versions", "the largest such lag in the window", source="session"),
        Metric("priority_lag_mean", "versions", "apex, r2d2: learner updates between the parameters that computed "
               "a sampled item's priority (its actor's, or the learner's at its last replay) and the learner's",
               source="session"),
        Metric("sequence_mb_per_s", "MB/s", "r2d2: bytes of stored sequences (observations, actions, rewards, "
               "recurrent state) the learner sampled", source="session"),
        Metric("env_frac", "share", "time stepping envs (mean over the processes that do)", source="session"),
        Metric("inference_frac", "share", "time selecting actions", source="session"),
        Metric("learn_frac", "share", "time in forward/backward/optimiser step", source="session"),
        Metric("wait_frac", "share", "time blocked on other processes", source="session"),
        Metric("sync_frac", "share", "time copying or all-reducing parameters", source="session"),
        Metric("return_mean", "return", "mean episodic return reached (purejaxrl-ppo: last 100 episodes, mean over "
               "agents)", source="session"),
        Metric("env_level_steps_per_s", "steps/s", "level 1 of Isaac Lab's three, from the training run's split: the "
               "env steps/s of its envs alone (steps_per_s / env_frac)", source="derived", derive=env_level,
               label="level 1: env step"),
        Metric("inference_level_steps_per_s", "steps/s", "level 2, from the split: env step + inference "
               "(steps_per_s / (env_frac + inference_frac)); level 3 is steps_per_s itself", source="derived",
               derive=inference_level, label="level 2: + inference"),
        Metric("return_first", "return", "mean episodic return after the run's first unit with a finished episode "
               "(where training started from: learning moved the return when return_mean is above it)",
               source="session"),
        Metric("time_to_target_s", "s", "training wall time, compile excluded, until return_mean first reached the "
               "target", source="session"),
        Metric("steps_to_target", "steps", "env steps per agent until then", source="session"),
        Metric("samples_per_s", "steps/s", "env steps (transitions) consumed by learner updates", source="session"),
        Metric("actor_steps_per_s", "steps/s", "env steps the actors made (may run ahead of consumption: queued, "
               "or dropped)", source="session"),
        Metric("transfer_frac", "share", "time moving data between processes or host and device", source="session"),
        Metric("queue_wait_ms", "ms", "mean time the learner waited for its next batch", source="session"),
        Metric("h2d_mb_per_s", "MB/s", "bytes copied host to device (0 on CPU)", source="session"),
        Metric("prediction_queue_mean", "items", "ga3c: prediction requests waiting as a predictor came for its "
               "next batch (mean over batches)", source="session"),
        Metric("training_queue_mean", "items", "ga3c: experiences waiting as a trainer came for its next batch "
               "(mean over updates)", source="session"),
        Metric("predict_batch_mean", "items", "ga3c: prediction requests (one agent's envs each) per forward pass "
               "(mean)", source="session"),
        Metric("train_batch_mean", "items", "ga3c: experiences (t_max steps of one agent's envs) per update (mean)",
               source="session"),
    )

    def section(self, results, out_dir: str) -> str:
        from rlbench.families.learners.report import learners_section
        return learners_section(results, self.kinds)
