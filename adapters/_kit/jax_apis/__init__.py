"""The JAX env APIs rlbench steps, one module each (rlbench.contract.JaxEnvApi: how an env of the API is recognised,
its spaces read for planning and its env loaded into the kit's FunctionalEnv, adapters/_kit/jax_env.py). rlbench's
registry imports every module here by name (`_`-prefixed ones are what they share), then the
`rlbench.jax_env_apis` entry-point group: an installed package adds an API without a change here. Each module
imports `rlbench.api`, the kit and the standard library at its top; JAX and numpy inside functions.
"""
