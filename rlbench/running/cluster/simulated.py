"""A Ray cluster of several nodes on this one machine (ray.cluster_utils.Cluster), to see `--cluster` work without a
second machine: a head that only coordinates and `nodes` nodes of `cpus` CPUs, each given its own cores
(RLBENCH_NODE_CPUS; they wrap around when there are too few, and the nodes that share a core take turns).

    python -m rlbench.running.cluster.simulated --nodes 2 --cpus 1 -- rlbench run suites/quick.toml --cluster {address}
"""
import argparse
import os
import subprocess
import sys

from rlbench.running.cluster.cores import NODE_CPUS_VAR


class SimulatedCluster:
    def __init__(self, nodes: int = 2, cpus: int = 1, env_vars: dict = None):
        from ray.cluster_utils import Cluster
        mine = sorted(os.sched_getaffinity(0))
        self.cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
        self.nodes, self.cores = [], {}   # node -> the cores it was given
        for i in range(nodes):
            self.add_node(cpus, [mine[(i * cpus + j) % len(mine)] for j in range(cpus)], env_vars)
        self.cluster.wait_for_nodes()

    @property
    def address(self) -> str:
        return self.cluster.address

    def add_node(self, cpus: int, cores: list, env_vars: dict = None):
        node = self.cluster.add_node(num_cpus=cpus, env_vars={NODE_CPUS_VAR: ",".join(map(str, cores)),
                                                              **(env_vars or {})})
        self.nodes.append(node)
        self.cores[node] = tuple(cores)
        return node

    def kill(self, node) -> None:
        """The node's raylet and workers die at once, as a machine that lost power."""
        self.cluster.remove_node(node, allow_graceful=False)
        self.nodes.remove(node)

    def shutdown(self) -> None:
        self.cluster.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="run a command against a Ray cluster simulated on this machine")
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--cpus", type=int, default=1, help="CPUs (and cores) per node")
    p.add_argument("command", nargs=argparse.REMAINDER, help="after --; {address} is the cluster's address")
    args = p.parse_args(argv)
    command = [c for c in args.command if c != "--"] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("a command to run is needed, after --")
    with SimulatedCluster(args.nodes, args.cpus) as cluster:
        print(f"simulated cluster: {args.nodes} nodes x {args.cpus} CPUs at {cluster.address}", file=sys.stderr)
        try:
            return subprocess.call([c.replace("{address}", cluster.address) for c in command])
        except KeyboardInterrupt:
            return 130


if __name__ == "__main__":
    sys.exit(main())
