"""`gymnasium-sync` and `gymnasium-async`: gymnasium's own SyncVectorEnv and AsyncVectorEnv, the main
environment's gymnasium (1.3). Their bodies are adapters._kit.gym_vec's, shared with `gymnasium14-sync` and
`gymnasium14-async` (adapters/gymnasium14_vector.py: gymnasium 1.4 in its own environment).

Both reset a finished env within the same step (AutoresetMode.SAME_STEP), as `serial` does, so every adapter
counts the same transitions.
"""

from adapters._kit.gym_vec import GymAsync, GymSync
from rlbench.api import register


@register
class GymnasiumSync(GymSync):
    name = "gymnasium-sync"
    description = "gymnasium.vector.SyncVectorEnv: all envs in this process"


@register
class GymnasiumAsync(GymAsync):
    name = "gymnasium-async"
    description = "gymnasium.vector.AsyncVectorEnv: one subprocess per env, pipes or shared memory"
