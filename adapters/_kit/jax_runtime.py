"""JAX for one cell: its settings, set before JAX starts (a cell is a fresh process), the devices to
run on, ahead-of-time compilation, placing and sharding over devices, and the session whose unit is one
compiled call. JAX itself comes in as an argument or is imported inside functions.
"""
import os
import sys
from time import perf_counter, perf_counter_ns

from rlbench.api import Option, Unsupported

JAX_POLICIES = ("random", "mlp")   # what every JAX adapter runs inside its program
JAX_NETS = ("mlp", "cnn", "cnn:impala")   # the networks (placed on a device); the CNNs on gymnax and purejaxrl-ppo

JAX_OPTIONS = (
    Option("devices", int, 1, "devices to shard over (jax.shard_map); 0 = all local devices (as many as "
                              "divide the work). On CPU, N > 1 forces N host devices (XLA_FLAGS) before JAX starts"),
    Option("platform", str, "auto", "JAX backend: auto = GPU for policy device=cuda, else JAX's default",
           choices=("auto", "cpu", "gpu")),
    Option("preallocate", bool, False, "XLA_PYTHON_CLIENT_PREALLOCATE: grab most of the GPU memory up front"),
    Option("mem_fraction", float, 0.0, "XLA_PYTHON_CLIENT_MEM_FRACTION (0 = JAX's default)", high=1),
)
FORCE_DEVICES = "--xla_force_host_platform_device_count"
RECORDED = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR",
            "XLA_FLAGS", "JAX_PLATFORMS", "JAX_COMPILATION_CACHE_DIR")  # what JAX reads as its backends start


def _settings(options) -> dict:
    env = {"XLA_PYTHON_CLIENT_PREALLOCATE": "true" if options["preallocate"] else "false"}
    if options["mem_fraction"] > 0:
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{options['mem_fraction']:g}"
    if options.get("devices", 1) > 1:
        flags = os.environ.get("XLA_FLAGS", "")
        if FORCE_DEVICES not in flags:
            flags = f"{flags} {FORCE_DEVICES}={options['devices']}".strip()
        env["XLA_FLAGS"] = flags
    return env


def _backends_started() -> bool:
    """Whether JAX has started its backends in this process (after which its settings are fixed). Merely
    imported it has not: a user's JAX env module imports it while the cell reads its workload."""
    if "jax" not in sys.modules:
        return False
    from jax._src import xla_bridge
    return xla_bridge.backends_are_initialized()


def start_jax(options):
    """Import JAX with the options' settings in place; returns (jax, device_settings as run)."""
    before = _backends_started()
    wanted = _settings(options)
    if not before:  # a fresh cell: the settings apply. Later (tests) they would only leak into children.
        os.environ.update(wanted)
    import jax
    recorded = {k: os.environ[k] for k in RECORDED if k in os.environ}
    return jax, {**recorded, "jax_started_before": before}


def platform_for(workload, options) -> str:
    if options["platform"] != "auto":
        return options["platform"]
    return "gpu" if workload.policy.name in JAX_NETS and workload.policy.device.startswith("cuda") else ""


def pick_devices(jax, workload, options, divides: int, what: str) -> list:
    """The devices to run on, or Unsupported naming why not."""
    platform = platform_for(workload, options)
    try:
        devices = jax.devices(platform) if platform else jax.devices()
    except RuntimeError as exc:
        lead = "no CUDA device: " if platform == "gpu" else ""
        raise Unsupported(f"{lead}JAX has no {platform} backend here (default: {jax.default_backend()}): "
                          f"{str(exc).splitlines()[0]}") from None
    if not options["devices"]:  # all local devices, or as many of them as divide the work
        return devices[:max(d for d in range(1, len(devices) + 1) if divides % d == 0)]
    want = options["devices"]
    if want > len(devices):
        hint = (f"; set XLA_FLAGS={FORCE_DEVICES}={want} before JAX is imported"
                if devices[0].platform == "cpu" else "")
        raise Unsupported(f"devices={want} but JAX sees {len(devices)} {devices[0].platform} device(s){hint}")
    if divides % want:
        raise Unsupported(f"{what}={divides} must be a multiple of devices={want}")
    return devices[:want]


def jax_supports(workload, options, adapter: str, policies: tuple = JAX_POLICIES):
    """Why the workload's policy cannot run inside a compiled program on the chosen platform, or None;
    `policies`: those the adapter runs."""
    pol = workload.policy
    if pol.name not in policies:
        listed = f"{', '.join(policies[:-1])} or {policies[-1]}"
        return f"{adapter} runs the policy inside the compiled loop: policy {listed} (got {pol.name})"
    if pol.name in JAX_NETS and pol.device.startswith("cuda") and options["platform"] == "cpu":
        return "policy device=cuda with platform=cpu"
    if pol.name in JAX_NETS and not (pol.device == "cpu" or pol.device.startswith("cuda")):
        return f"policy device={pol.device}: cpu or cuda"
    return None


def scan_supports(workload, options, adapter: str):
    """Why a batched JAX env program cannot take the workload, its env aside: env_kwargs, num_envs split over the
    devices, the policy inside the program; or None."""
    if workload.env_kwargs:
        return f"{adapter} takes no env_kwargs (got {', '.join(workload.env_kwargs)})"
    if options["devices"] > 1 and workload.num_envs % options["devices"]:
        return f"num_envs={workload.num_envs} must be a multiple of devices={options['devices']}"
    return jax_supports(workload, options, adapter)


def compile_ahead(jax, fn, *args, donate=(0,)):
    """jit -> lower -> compile, timed: (executable, seconds)."""
    t0 = perf_counter()
    compiled = jax.jit(fn, donate_argnums=donate).lower(*args).compile()
    return compiled, perf_counter() - t0


def sharded(jax, fn, devices, in_specs, out_specs):
    """fn over one device's shard, run on every device (no communication), or fn itself on one."""
    if len(devices) == 1:
        return fn
    from jax.sharding import Mesh
    mesh = Mesh(devices, ("d",))
    return jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)


def place(jax, tree, devices, split: bool):
    """Put a pytree on the devices: split along its leading axis, or replicated."""
    if len(devices) == 1:
        return jax.device_put(tree, devices[0])
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P
    sharding = NamedSharding(Mesh(devices, ("d",)), P("d") if split else P())
    return jax.device_put(tree, sharding)


def unaliased(jax, tree):
    """The tree with every leaf that shares a buffer with an earlier leaf copied: a carry is donated, and XLA
    refuses to donate one buffer twice. Real envs build such carries: a state holding the observation it returns
    (Jumanji's action masks, XLand-MiniGrid's TimeStep) is, unjitted, one array in two places."""
    seen = set()

    def own(leaf):
        buffers = tuple(shard.data.unsafe_buffer_pointer() for shard in leaf.addressable_shards)
        if id(leaf) in seen or (buffers and buffers in seen):
            return leaf.copy()
        seen.update((id(leaf), buffers))
        return leaf
    return jax.tree.map(own, tree)


class CompiledScan:
    """A session whose unit is one compiled call on a carry (set by the subclass with jax, run, params and
    per_unit): dispatched, then waited for; drain() waits for whatever is still queued."""
    sync = True      # tests turn this off to show what drain() catches
    returns_at = -1  # the carry's element that sums reward per env

    def compile(self, unit, carry, params, devices) -> float:
        """Place the carry (split over the devices) and the params (replicated) and compile `unit`, one
        device's share of the work, for them; returns the seconds compile_ahead took."""
        from jax.sharding import PartitionSpec as P
        jax = self.jax
        fn = sharded(jax, unit, devices, (P("d"), P()), P("d"))
        self.carry = unaliased(jax, place(jax, carry, devices, split=True))
        self.params = place(jax, params, devices, split=False)
        self.run, compile_s = compile_ahead(jax, fn, self.carry, self.params)
        return compile_s

    def step(self) -> int:
        self.carry = self.run(self.carry, self.params)
        if self.sync:
            self.jax.block_until_ready(self.carry)
        return self.per_unit

    def unit_cost_us(self, calls: int = 200) -> float:
        """What a unit costs besides its program, measured here: a compiled no-op on the same carry and params
        (same placement, donated), dispatched, waited for and followed by a clock read, as step() and the
        protocol do once per unit; the median over `calls`, in microseconds. On a CPU it is noise against a
        40 ms unit; on a GPU, where a unit may take 100 us, it is what the harness costs."""
        jax = self.jax
        noop, _ = compile_ahead(jax, lambda carry, params: carry, self.carry, self.params)
        carry, times = self.carry, []
        for _ in range(calls + 5):   # the first calls warm the dispatch path: not kept
            t0 = perf_counter_ns()
            carry = noop(carry, self.params)
            jax.block_until_ready(carry)
            times.append(perf_counter_ns() - t0)
        self.carry = carry
        times = sorted(times[5:])
        return times[len(times) // 2] / 1e3

    def drain(self):
        self.jax.block_until_ready(self.carry)

    def returns(self):
        """Reward summed per env since open (keeps the rewards live in the program)."""
        return self.carry[self.returns_at]

    def close(self):
        self.carry = self.params = self.run = None
