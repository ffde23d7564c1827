"""`--cluster`: a run's cells on the nodes of a Ray cluster, each (cell, repeat) still a fresh interpreter
on cores of its own. Ray reserves (a STRICT_PACK placement-group bundle per job, no retries); rlbench
chooses the cores on the node (cores.py), runs the same Runner there (remote.py) and streams each row back
to the driver (dispatch.py); nodes.py decides which nodes are identical enough to compare."""
