"""Compiled programs (JAX: gymnax, EnvPool's XLA loop, Brax, PureJaxRL): whatever their kind, the cells
that compiled ahead of time, with compile time kept out of every rate."""
from rlbench.contract import Family


class Jax(Family):
    name = "jax"
    order = 20
    info_keys = ("compile_s", "device_settings")  # compile time inside setup_s; accelerator settings applied

    def section(self, results, out_dir: str) -> str:
        from rlbench.families.jax.report import jax_section
        return jax_section(results)
