"""The replay family: workloads, the shared actor/learner driver, its report section."""
