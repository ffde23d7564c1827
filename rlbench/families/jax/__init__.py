"""Compiled programs (JAX: gymnax, EnvPool's XLA loop, Brax, PureJaxRL): whatever their kind, the cells
that compiled ahead of time, with compile time kept out of every rate."""
from rlbench.contract import Family
from rlbench.results.metrics import Metric


class Jax(Family):
    name = "jax"
    order = 20
    accelerator_framework = "jax"
    # compile time inside setup_s; accelerator settings applied; the API of a user's JAX env (gymnax, jumanji)
    info_keys = ("compile_s", "device_settings", "env_api")
    metrics = (
        Metric("compile_s", "s", "ahead-of-time compilation, inside setup_s and never in a rate", source="info",
               summary=(), label="compile s"),
        Metric("time_per_agent_s", "s", "wall time per agent of one whole training run at the window's aggregate "
               "rate", source="session"),
        Metric("state_gb_per_s", "GB/s", "the compiled loop's carry read and written per second", source="session"),
        Metric("device_copy_gbps", "GB/s", "the devices' measured copy rate", source="session",
               label="device copy GB/s"),
        Metric("state_bw_frac", "share", "state_gb_per_s / device_copy_gbps", source="session",
               label="state bandwidth share"),
        Metric("unit_cost_us", "us", "what a unit costs besides its program: a compiled no-op on the same carry, "
               "dispatched, waited for and timed as a unit is (median of 200, measured in the cell)",
               source="session", label="unit cost us"),
        Metric("unit_cost_frac", "share", "unit_cost_us x units per second: the share of the window that "
               "per-unit cost took", source="session", label="unit cost share"),
    )

    def section(self, results, out_dir: str) -> str:
        from rlbench.families.jax.report import jax_section
        return jax_section(results)
