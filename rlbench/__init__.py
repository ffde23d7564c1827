"""rlbench: compare RL parallelism strategies with figures a reviewer can trust.

Importing rlbench is cheap: no framework (torch, jax, ray, envpool) is imported here.
"""
__version__ = "0.1.0"
SCHEMA_VERSION = 1
