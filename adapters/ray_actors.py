"""`ray-actors`: RLlib's execution model without RLlib: `actors` Ray actors, each holding a gymnasium
SyncVectorEnv of num_envs / actors envs, driven from this process (its modes, policy placements and transports:
docs/strategies/stepping.md, "Ray actors"). Starting or joining Ray (RAY_ADDRESS, `--ray-address`) is
`runtime_init_s`, outside every rate.
"""
import os
from dataclasses import replace

import numpy as np

from adapters._kit import batch, ray_runtime
from adapters._kit.nets import policy_params
from rlbench.api import (
    Adapter,
    Option,
    Unsupported,
    Workload,
    env_fns,
    make_env,
    make_policy,
    register,
)

STRATEGIES = {"pack": "PACK", "spread": "SPREAD"}


class EnvActor:
    """The body of the Ray actor (wrapped with ray.remote at open): envs lo..lo+M-1 of the workload. For a
    recurrent policy it tracks which of its observations start an episode (its envs reset in the step that
    ends one): its own policy is told, or, with `report_starts`, the driver's, beside the observations."""

    def __init__(self, workload_dict, lo, count, policy_in_actor, object_store, report_starts):
        import gymnasium as gym
        workload = Workload.from_dict(workload_dict)
        fns = env_fns(workload)[lo:lo + count]
        self.envs = gym.vector.SyncVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
        self.obs, _ = self.envs.reset(seed=workload.seed + lo)  # env j gets seed + lo + j, as in `serial`
        self.policy = None
        spaces = self.envs.single_observation_space, self.envs.single_action_space
        # a Dict or Tuple action space: the driver's per-env actions batched part by part here, in the actor
        self.to_batch = batch.vector_actions(spaces[1])
        if policy_in_actor:
            own = replace(workload, seed=workload.seed + lo)  # one random stream per actor
            if policy_params(workload.policy, *spaces):
                own = workload                                # a network: the same weights in every actor
            self.policy = batch.for_vector_env(make_policy(own, *spaces), spaces[1])
        self.starts = np.ones(count, dtype=np.bool_)  # every env's first observation starts an episode
        self.track = report_starts or (self.policy is not None and self.policy.recurrent)
        self.report_starts, self.object_store = report_starts, object_store

    def where(self) -> dict:
        import socket

        import ray
        return {"node_id": ray.get_runtime_context().get_node_id(), "hostname": socket.gethostname(),
                "pid": os.getpid()}

    def observe(self):
        return self._out()

    def step(self, actions=None):
        if actions is None:
            actions = self.policy(self.obs, self.starts) if self.policy.recurrent else self.policy(self.obs)
        elif self.to_batch is not None:
            actions = self.to_batch(actions)
        self.obs, _, terminated, truncated, _ = self.envs.step(actions)
        if self.track:
            self.starts = np.logical_or(terminated, truncated)
        return self._out()

    def _out(self):
        obs = self.obs
        if self.object_store:
            import ray
            obs = ray.put(obs)
        return (obs, self.starts) if self.report_starts else obs


class RayActorsSession:
    def __init__(self, workload, options):
        self.workload, self.opts = workload, options
        self.actors, self.pg, self._shutdown = [], None, None
        n, self.per = options["actors"], workload.num_envs // options["actors"]
        try:
            self._open(workload, options, n)
        except BaseException:
            self.close()
            raise

    def _open(self, workload, o, n):
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        local_cpus = max(len(os.sched_getaffinity(0)), int(np.ceil(n * o["actor_cpus"])))
        init_s, self._shutdown = ray_runtime.start(num_cpus=local_cpus)
        self.ray = ray
        cluster = ray_runtime.cluster_info(ray)
        have, need = cluster["resources"].get("CPU", 0), n * o["actor_cpus"]
        if need > have:
            raise Unsupported(f"{n} actors x actor_cpus={o['actor_cpus']:g} need {need:g} CPUs; the cluster has "
                              f"{have:g} (valid: fewer actors or a smaller actor_cpus)")
        self.pg = placement_group([{"CPU": o["actor_cpus"]}] * n, strategy=STRATEGIES[o["placement"]])
        ray.get(self.pg.ready(), timeout=o["ready_timeout_s"])
        obs_space, act_space = self._spaces()
        self.obs_space = obs_space   # how actors' batches join (a Text part is a tuple, not an array)
        self.policy = make_policy(workload, obs_space, act_space) if o["policy"] == "driver" else None
        self.recurrent = self.policy is not None and self.policy.recurrent
        remote = ray.remote(EnvActor)
        object_store = o["transport"] == "object_store"
        for i in range(n):
            strategy = PlacementGroupSchedulingStrategy(placement_group=self.pg, placement_group_bundle_index=i)
            self.actors.append(remote.options(num_cpus=o["actor_cpus"], scheduling_strategy=strategy).remote(
                self.workload.to_dict(), i * self.per, self.per, o["policy"] == "actor", object_store,
                self.recurrent))
        placement = ray.get([a.where.remote() for a in self.actors], timeout=o["ready_timeout_s"])
        self.info = {"workers": n, "runtime_init_s": init_s, "cluster": cluster,
                     "placement": [{"actor": i, **p} for i, p in enumerate(placement)],
                     "batch_size": self.per * (o["wait_k"] if o["mode"] == "async" else n)}
        self.obs, self.starts = self._join(ray.get([a.observe.remote() for a in self.actors]))
        self.pending = {}
        if o["mode"] == "async":
            self._send(range(n), self.obs, self.starts)

    def _spaces(self):
        env = make_env(self.workload.env_id, **self.workload.env_kwargs)
        try:
            return env.observation_space, env.action_space
        finally:
            env.close()

    def _fetch(self, reply):
        """The observations an actor replied with; the concatenation each caller does (batch.join: one
        np.concatenate per part of a Dict or Tuple observation) copies them into driver memory, reading
        every byte, so the figure never skips the data."""
        if isinstance(reply, self.ray.ObjectRef):
            reply = self.ray.get(reply)  # zero-copy view of the object store
        return reply

    def _join(self, replies):
        """The actors' replies as one batch of observations and, for a recurrent driver policy, their
        episode-start flags (else None)."""
        if not self.recurrent:
            return batch.join([self._fetch(r) for r in replies], self.obs_space), None
        return (batch.join([self._fetch(obs) for obs, _ in replies], self.obs_space),
                np.concatenate([starts for _, starts in replies]))

    def _act(self, obs, starts, indices=None):
        """A driver policy's actions; a recurrent one is told the episode starts and, for a batch of some
        actors (async), which envs it holds."""
        if not self.recurrent:
            return self.policy(obs)
        ids = None if indices is None else np.concatenate([np.arange(i * self.per, (i + 1) * self.per)
                                                            for i in indices])
        return self.policy(obs, starts, ids)

    def _send(self, indices, obs, starts):
        """Start the next step of these actors; with a driver policy, for the observations given."""
        actions = self._act(obs, starts, indices) if self.policy is not None else None
        for j, i in enumerate(indices):
            act = actions[j * self.per:(j + 1) * self.per] if actions is not None else None
            self.pending[self.actors[i].step.remote(act)] = i

    def step(self) -> int:
        if self.opts["mode"] == "sync":
            actions = self._act(self.obs, self.starts) if self.policy is not None else None
            refs = [a.step.remote(actions[i * self.per:(i + 1) * self.per] if actions is not None else None)
                    for i, a in enumerate(self.actors)]
            self.obs, self.starts = self._join(self.ray.get(refs))
            return self.workload.num_envs
        ready, _ = self.ray.wait(list(self.pending), num_returns=self.opts["wait_k"])
        indices = [self.pending.pop(r) for r in ready]
        self._send(indices, *self._join(self.ray.get(ready)))
        return len(indices) * self.per

    def close(self):
        ray = getattr(self, "ray", None)
        if ray is not None and ray.is_initialized():
            for actor in self.actors:
                ray.kill(actor)
            if self.pg is not None:
                from ray.util.placement_group import remove_placement_group
                remove_placement_group(self.pg)
        self.actors, self.pg, self.pending = [], None, {}
        if self._shutdown is not None:
            self._shutdown()
            self._shutdown = None


@register
class RayActors(Adapter):
    name = "ray-actors"
    description = "Ray actors each holding a gymnasium vector env; sync gather or async ray.wait (RLlib's model)"
    requires = ("ray", "gymnasium")

    options = (
        Option("actors", int, 2, "Ray actors; each holds num_envs / actors envs", low=1),
        Option("mode", str, "sync", "sync: step all, gather all; async: act on the first wait_k to return",
               ("sync", "async")),
        Option("wait_k", int, 1, "async: actors taken per ray.wait", low=1),
        Option("policy", str, "driver", "where actions are selected", ("driver", "actor")),
        Option("transport", str, "inline", "observations returned inline or through ray.put",
               ("inline", "object_store")),
        Option("placement", str, "pack", "placement group strategy", tuple(STRATEGIES)),
        Option("actor_cpus", float, 1.0, "CPUs each actor reserves"),
        Option("ready_timeout_s", float, 60.0, "how long placement and actor start-up may take", low=0, open_low=True),
    )

    def policy_placement(self, options):
        return "workers" if options.get("policy") == "actor" else "central"

    def supports(self, workload, options):
        n = options["actors"]
        if n < 1 or workload.num_envs % n:
            return f"num_envs={workload.num_envs} must be a positive multiple of actors={n}"
        if options["mode"] == "async" and not 1 <= options["wait_k"] <= n:
            return f"wait_k={options['wait_k']} must be between 1 and actors={n}"
        return None

    def open(self, workload, options):
        return RayActorsSession(workload, options)

    def tune_space(self, num_envs, cpus):
        """An actor per core (and half as many), synchronous gather; async ray.wait on half the actors
        where there are several."""
        counts = sorted(a for a in {min(cpus, num_envs), max(1, min(cpus, num_envs) // 2)} if num_envs % a == 0)
        space = [{"actors": a} for a in counts]
        return space + [{"actors": a, "mode": "async", "wait_k": a // 2} for a in counts if a >= 2]
