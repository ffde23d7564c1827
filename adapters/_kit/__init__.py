"""What adapters share, so that no adapter imports another: each module here has one job and imports
only `rlbench.api`, the standard library and numpy at its top. A framework (torch, JAX, Ray) is
imported inside functions, so listing adapters imports none. Not an adapter: the registry skips `_kit`.
"""
