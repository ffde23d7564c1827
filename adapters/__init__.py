"""Adapters: one module per framework or execution-model family.

Each module registers its adapters with `rlbench.api.register` and imports its framework only
inside `open()`, so listing adapters stays cheap and works without every framework installed.
"""
RLBENCH_ADAPTERS = True  # rlbench's own package: rlbench.registry refuses a folder of this name that hides it
