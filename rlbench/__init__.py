"""rlbench: compare RL parallelism strategies with figures a reviewer can trust.

Importing rlbench is cheap: no framework (torch, jax, ray, envpool) is imported here.
"""
import os as _os

__version__ = "0.1.0"
SCHEMA_VERSION = 1
# the checkout rlbench runs from (its adapters' environments install it from here; env.json's git commit)
ROOT = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
