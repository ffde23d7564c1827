"""`gymnasium14-sync` and `gymnasium14-async`: `gymnasium-sync` and `gymnasium-async` (the same code,
adapters._kit.gym_vec) with gymnasium 1.4.0, in its own environment (adapters/envs/gymnasium-1.4.txt): the main
environment stays on gymnasium 1.3 (gymnax pins it below 1.4), and 1.4's users' vector envs are measured too.
SyncVectorEnv's and AsyncVectorEnv's arguments used here, AutoresetMode and the shared-memory helpers are the
same in 1.4 (it adds AsyncVectorEnv(max_concurrency=...), not used: the adapters stay 1.3's twins).
"""

from adapters._kit.gym_vec import GymAsync, GymSync
from rlbench.api import register

ENVIRONMENT = "gymnasium-1.4"   # adapters/envs/gymnasium-1.4.txt: gymnasium==1.4.0


@register
class Gymnasium14Sync(GymSync):
    name = "gymnasium14-sync"
    description = "gymnasium-sync with gymnasium 1.4.0 (own environment): SyncVectorEnv, all envs in this process"
    environment = ENVIRONMENT


@register
class Gymnasium14Async(GymAsync):
    name = "gymnasium14-async"
    description = ("gymnasium-async with gymnasium 1.4.0 (own environment): AsyncVectorEnv, one subprocess per "
                   "env, pipes or shared memory")
    environment = ENVIRONMENT
