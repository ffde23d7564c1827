"""Joining the cluster a run or a tune names, before anything is written: the class of nodes it runs on,
every cell checked to fit one of them; leaving it however the command ends."""
import sys

from rlbench.errors import UsageError


def join(settings, cells=()):
    """The ClusterView of `settings.cluster` (None when it is ""), said on stderr."""
    if not settings.cluster:
        return None
    if settings.ray_address:
        raise UsageError(f"--ray-address {settings.ray_address} with --cluster {settings.cluster}: on a cluster each "
                         "cell's own Ray runs on the cores it was given (valid: one of the two)")
    from rlbench.running.cluster.dispatch import too_big
    from rlbench.running.cluster.nodes import survey
    view = survey(settings.cluster, settings.node_class)
    big = too_big(cells, settings, view)
    if big:
        raise UsageError(f"--cluster {settings.cluster}: {big[0]}" + (f" (and {len(big) - 1} more)" if len(big) > 1
                                                                      else ""))
    for node, why in view.left_out:
        print(f"rlbench: cluster: left out {node}: {why}", file=sys.stderr)
    print(f"rlbench: cluster {settings.cluster}: class {view.class_id}, {len(view.nodes)} node(s) of {view.cpus} "
          f"cores: " + ", ".join(n.name for n in view.nodes), file=sys.stderr)
    return view


def leave() -> None:
    if "rlbench.running.cluster.nodes" in sys.modules:
        from rlbench.running.cluster.nodes import disconnect
        disconnect()
