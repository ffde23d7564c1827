"""Families of work rlbench measures (stepping, learners, jax, replay, validation): each a plug-in owning
its workloads, info keys, steps before a sweep, summary extras and report section."""
