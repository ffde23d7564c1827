"""What the replay family's adapters (kind "replay") import besides rlbench.api: the session that drives a
store through a workload, the workloads and their spec, where on-disk stores live, the prioritized
sampler's constants and the page-cache option of disk stores."""
from rlbench.contract import PAGE_CACHE
from rlbench.families.replay.driver import (
    PREFIX,
    PRIORITY_ALPHA,
    PRIORITY_BETA,
    WORKLOADS,
    OnDevice,
    ReplaySession,
    in_process_only,
    no_reuse_bound,
    replay_spec,
    scratch_dir,
)
from rlbench.machine import pagecache

__all__ = ["ReplaySession", "OnDevice", "replay_spec", "in_process_only", "no_reuse_bound", "scratch_dir", "PREFIX",
           "WORKLOADS", "PRIORITY_ALPHA", "PRIORITY_BETA", "PAGE_CACHE", "pagecache"]
