"""Brax: `brax` (env stepping, jit + vmap inside lax.scan) and `brax-ppo` (Brax's own PPO trainer, on Brax's envs or
on MuJoCo Playground's DeepMind Control tasks with Playground's wrappers, as Playground trains them).

Both run in their own environment (adapters/envs/brax.txt: jax 0.9.2, brax 0.14.2); the main environment imports
this module only for names, options and supports(), so brax and jax are imported inside the sessions only.
How they are built and timed: docs/strategies/jax.md, "How the Brax adapters are built".
"""
import math
import os
import sys
from time import perf_counter

from adapters._kit.jax_policy import make_actor
from adapters._kit.jax_runtime import JAX_OPTIONS, CompiledScan, jax_supports, pick_devices, start_jax
from adapters._kit.learner_stats import TargetRun
from adapters._kit.playground_envs import IMPL, TASKS, load_env, physics_settings
from rlbench.api import Adapter, Option, Unsupported, register

ENVS = {"brax/ant": "ant", "brax/halfcheetah": "halfcheetah"}   # rlbench id -> brax.envs name
BACKENDS = ("positional", "generalized", "spring", "mjx")       # positional: Brax's training colab default
POLICIES = ("random", "mlp")
COMPILE_EVENTS = "/jax/core/compile/"   # jaxpr_trace_duration, jaxpr_to_mlir_module_duration, backend_compile_duration

BACKEND = Option("backend", str, "positional", "Brax physics pipeline (positional: Brax's training colab "
                 "default)", BACKENDS)
EPISODE_LENGTH = Option("episode_length", int, 1000, "steps before EpisodeWrapper truncates an episode", low=1)


def _common_supports(workload, options, adapter, playground=False):
    valid = {**ENVS, **(TASKS if playground else {})}
    if workload.env_id not in valid:
        return f"{adapter} has no env {workload.env_id} (valid: {', '.join(valid)})"
    if workload.env_kwargs:
        return f"{adapter} takes no env_kwargs (got {', '.join(workload.env_kwargs)})"
    if options["backend"] not in BACKENDS:   # options come typed and checked; kept for direct callers
        return f"backend={options['backend']} (valid: {', '.join(BACKENDS)})"
    return None


def make_env(workload, options):
    from brax import envs
    return envs.get_environment(ENVS[workload.env_id], backend=options["backend"])


# -- brax: env stepping ------------------------------------------------------------------------------------

class BraxSession(CompiledScan):
    """One unit: scan_T steps of all num_envs wrapped Brax envs, policy included, one compiled call."""
    returns_at = 2

    def __init__(self, workload, options):
        jax, settings = start_jax(options)
        import jax.numpy as jnp
        import numpy as np
        from brax import envs
        self.jax = jax
        clock = CompileClock()
        devices = pick_devices(jax, workload, options, workload.num_envs, "num_envs")
        env = envs.training.wrap(make_env(workload, options), episode_length=options["episode_length"])
        T, n, d = options["scan_T"], workload.num_envs, len(devices)
        low = -np.ones((env.action_size,), np.float32)
        params, act = make_actor(jax, workload, (env.observation_size,), ("box", low, -low))

        def unit(carry, params):  # one device's envs
            def body(c, _):
                state, key, ret = c
                key, k_act = jax.random.split(key[0])
                state = env.step(state, act(params, state.obs, k_act))
                return (state, key[None], ret + state.reward), None
            return jax.lax.scan(body, carry, None, length=T)[0]

        keys = jax.random.split(jax.random.PRNGKey(workload.seed), n + d)
        t0 = perf_counter()
        state = jax.jit(env.reset)(keys[:n])
        jax.block_until_ready(state)
        self.reset_s = perf_counter() - t0
        carry = (state, keys[n:], jnp.zeros((n,), jnp.float32))   # one loop key per device
        self.compile(unit, carry, params, devices)
        compile_s = clock.stop()   # the scan's lower + compile and the reset's jit
        self.per_unit = T * n
        self.info = {"compile_s": compile_s, "device": devices[0].platform, "workers": d,
                     "device_settings": {**settings, "devices": d, "backend": options["backend"]}}



@register
class Brax(Adapter):
    name = "brax"
    kind = "vector_env"
    environment = "brax"
    description = ("Brax envs (jax): envs.training.wrap (vmap, episode, auto-reset), lax.scan over scan_T steps, "
                   "random or MLP actions inside, AOT-compiled")
    requires = ("brax", "jax")
    unit_option = "scan_T"
    options = (Option("scan_T", int, 128, "env steps per unit (one lax.scan; each of num_envs envs)", low=1),
               BACKEND, EPISODE_LENGTH, *JAX_OPTIONS)

    def supports(self, workload, options):
        if options["devices"] > 1 and workload.num_envs % options["devices"]:
            return f"num_envs={workload.num_envs} must be a multiple of devices={options['devices']}"
        return _common_supports(workload, options, self.name) or jax_supports(workload, options, self.name)

    def open(self, workload, options):
        return BraxSession(workload, options)


# -- brax-ppo: Brax's PPO trainer, one unit = one iteration of train()'s loop ------------------------------

class CompileClock:
    """Wall time JAX spends compiling while it runs: the union of its /jax/core/compile/* time spans
    (jaxpr trace, lowering to MLIR, backend compile), as jax.monitoring reports them; nested tracing
    (an inner jit traced inside its outer one) overlaps and counts once."""

    def __init__(self):
        from jax._src import monitoring
        self.monitoring, self.spans = monitoring, []
        monitoring.register_event_time_span_listener(self._on_span)

    def _on_span(self, event, start, end, **_):
        if event.startswith(COMPILE_EVENTS):
            self.spans.append((start, end))

    def stop(self) -> float:
        if self._on_span in self.monitoring._event_time_span_listeners:
            self.monitoring.unregister_event_time_span_listener(self._on_span)
        return _covered(self.spans)


def _covered(spans) -> float:
    """Seconds covered by the union of (start, end) intervals."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def restore_device_put(jax) -> list:
    """Brax 0.14.2's PPO calls jax.device_put_replicated, which JAX 0.10 removed (this project's brax environment
    pins jax 0.9.2, which has it; a GPU machine's CUDA jax may be newer). Where it is gone, JAX's own drop-in
    replacements (docs/migrate_pmap.md: device_put onto a NamedSharding along a new leading axis, as pmap takes
    it) stand in for it and device_put_sharded; returns the names put back."""
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    def replicated(x, devices):
        sharding = NamedSharding(Mesh(np.array(devices), ("x",)), P("x"))
        return jax.tree.map(lambda y: jax.device_put(jnp.stack([y] * len(devices)), sharding), x)

    def sharded(shards, devices):
        sharding = NamedSharding(Mesh(np.array(devices), ("x",)), P("x"))
        return jax.tree.map(lambda *xs: jax.device_put(jnp.stack(xs), sharding), *shards)

    put_back = []
    for name, fn in (("device_put_replicated", replicated), ("device_put_sharded", sharded)):
        try:
            getattr(jax, name)
        except AttributeError:
            setattr(jax, name, fn)
            put_back.append(name)
    return put_back


class _Stop(Exception):
    """Raised from progress_fn to end train() when the session closes."""


class BraxPPOSession(TargetRun):
    def __init__(self, workload, options):
        import queue
        import threading
        if options["platform"] == "cpu" and "jax" not in sys.modules:
            os.environ["JAX_PLATFORMS"] = "cpu"   # train() pmaps over the default backend's devices
        jax, settings = start_jax(options)
        clock = CompileClock()
        platform = "gpu" if options["platform"] == "auto" and workload.policy.device.startswith("cuda") \
            else options["platform"]
        if platform in ("cpu", "gpu") and jax.default_backend() != platform:
            lead = "no CUDA device: " if platform == "gpu" else ""
            raise Unsupported(f"{lead}brax-ppo runs on JAX's default backend ({jax.default_backend()}), "
                              f"not {platform}")
        devices = jax.local_devices()
        want = options["devices"] or len(devices)
        if want > len(devices):
            raise Unsupported(f"devices={want} but JAX sees {len(devices)} {devices[0].platform} device(s)")
        if workload.num_envs % want:
            raise Unsupported(f"num_envs={workload.num_envs} must be a multiple of devices={want}")
        self.jax, self.options = jax, options
        restored = restore_device_put(jax)
        per_step = options["batch_size"] * options["unroll_length"] * options["num_minibatches"] \
            * options["action_repeat"]
        K = options["training_steps_per_unit"]
        self.updates_per_unit = K * options["num_updates_per_batch"] * options["num_minibatches"]
        self.results, self.permits = queue.Queue(), queue.Queue()

        def progress(step, metrics):
            if "training/sps" not in metrics:   # the initial evaluation (eval_envs > 0), before any training
                return
            self.results.put(("epoch", int(step), metrics))
            if self.permits.get() == "stop":
                raise _Stop

        evals = 10 ** 9   # epochs; train() never gets through them: close() stops it
        kwargs, physics = self._train_kwargs(workload, options, evals, K * per_step * (evals - 1), progress, want)

        def run():
            try:
                from brax.training.agents.ppo import train as ppo
                ppo.train(**kwargs)
                self.results.put(("done", None, None))
            except _Stop:
                pass
            except BaseException as exc:  # noqa: BLE001  (handed to the main thread)
                self.results.put(("error", exc, None))

        t0 = perf_counter()
        self.thread = threading.Thread(target=run, name="brax-ppo-train", daemon=True)
        self.thread.start()
        try:
            self.last_step = self._next()   # the first epoch: compile + one run, inside setup_s
        finally:
            self.compile_s = clock.stop()
        self.first_epoch_s = perf_counter() - t0
        self.iterations = 0
        self.return_ = None
        self.t_start = None
        self.time_to_target = self.steps_to_target = None
        self.metrics = self
        self.info = {"compile_s": self.compile_s, "device": devices[0].platform, "workers": want,
                     "batch_size": per_step,
                     "device_settings": {**settings, "devices": want, **physics,
                                         **({"jax_drop_ins": restored} if restored else {})}}

    @staticmethod
    def _train_kwargs(workload, options, evals, num_timesteps, progress, devices):
        import functools

        from brax.training.agents.ppo import networks as ppo_networks
        hidden = tuple(workload.policy.hidden)
        if workload.env_id in TASKS:   # a Playground task, trained as Playground trains it: its own wrappers
            from mujoco_playground import wrapper
            env, config = load_env(TASKS[workload.env_id], options["impl"])
            own = {"environment": env, "wrap_env_fn": wrapper.wrap_for_brax_training}
            physics = {"playground_env": TASKS[workload.env_id], "physics": physics_settings(env, config)}
        else:
            own = {"environment": make_env(workload, options)}
            physics = {"backend": options["backend"]}
        return dict(
            **own, num_timesteps=num_timesteps, num_evals=evals,
            max_devices_per_host=devices, num_envs=workload.num_envs, episode_length=options["episode_length"],
            action_repeat=options["action_repeat"], unroll_length=options["unroll_length"],
            batch_size=options["batch_size"], num_minibatches=options["num_minibatches"],
            num_updates_per_batch=options["num_updates_per_batch"], learning_rate=options["learning_rate"],
            entropy_cost=options["entropy_cost"], discounting=options["discounting"],
            reward_scaling=options["reward_scaling"], normalize_observations=options["normalize_observations"],
            network_factory=functools.partial(ppo_networks.make_ppo_networks, policy_hidden_layer_sizes=hidden,
                                              value_hidden_layer_sizes=hidden),
            seed=workload.seed, run_evals=options["eval_envs"] > 0, num_eval_envs=max(options["eval_envs"], 1),
            progress_fn=progress), physics

    def _next(self):
        kind, value, metrics = self.results.get()
        if kind == "error":
            raise value
        if kind == "done":
            raise RuntimeError("brax ppo.train returned: its num_timesteps ran out")
        if "eval/episode_reward" in metrics:
            self.return_ = float(metrics["eval/episode_reward"])
        return value

    def step(self) -> int:
        if self.t_start is None:
            self.t_start = perf_counter()
        self.permits.put("go")
        step = self._next()
        done, self.last_step = step - self.last_step, step
        self.iterations += 1
        self.started_at(self.return_)
        if self.time_to_target is None and self.return_ is not None \
                and self.return_ >= self.options["target_return"]:
            self.time_to_target = perf_counter() - self.t_start
            self.steps_to_target = step
        return done

    # -- metrics over the timed window --
    def reset(self):
        self.mark = self.iterations

    def read(self, seconds):
        return {"updates_per_s": (self.iterations - self.mark) * self.updates_per_unit / seconds,
                "return_mean": self.return_, "return_first": self.return_first,
                "time_to_target_s": self.time_to_target, "steps_to_target": self.steps_to_target}

    def close(self):
        if self.thread.is_alive():
            self.permits.put("stop")
            self.thread.join(timeout=60)


PPO_OPTIONS = (
    BACKEND,
    IMPL,
    EPISODE_LENGTH,
    Option("unroll_length", int, 5, "steps per env per unroll (Brax's unroll_length)", low=1),
    Option("batch_size", int, 64, "unrolls per minibatch; batch_size x num_minibatches must be a multiple of "
                                  "num_envs (Brax's Ant: 2048 with 4096 envs on a GPU)", low=1),
    Option("num_minibatches", int, 4, "minibatches per training step (Brax's Ant: 32)", low=1),
    Option("num_updates_per_batch", int, 4, "passes over each batch (Brax's Ant: 4)", low=1),
    Option("training_steps_per_unit", int, 1, "Brax training steps per epoch (per progress_fn call) = one unit", low=1),
    Option("action_repeat", int, 1, "Brax's action_repeat", low=1),
    Option("learning_rate", float, 3e-4, "Adam learning rate", low=0, open_low=True),
    Option("entropy_cost", float, 1e-2, "entropy bonus"),
    Option("discounting", float, 0.97, "discount", high=1),
    Option("reward_scaling", float, 10.0, "reward scale (Brax's Ant: 10)", low=0, open_low=True),
    Option("normalize_observations", bool, True, "running observation normalisation"),
    Option("eval_envs", int, 0, "Brax's evaluator after every epoch on this many envs (its time inside each "
                                "unit); 0 = run_evals off, no return_mean"),
    Option("target_return", float, math.inf, "eval return counted as reached (time_to_target_s; needs eval_envs)",
           low=-math.inf, finite=False),
)


@register
class BraxPPO(Adapter):
    name = "brax-ppo"
    kind = "learner"
    algo = "ppo"
    environment = "brax"
    description = ("Brax's PPO (brax.training.agents.ppo.train) on a thread; one unit = one training epoch of "
                   "train()'s own loop, between two progress_fn calls")
    requires = ("brax", "jax")
    options = (*PPO_OPTIONS, *JAX_OPTIONS)

    def supports(self, workload, options):
        pol = workload.policy
        if pol.name != "mlp":
            return f"brax-ppo trains the policy: needs policy mlp (got {pol.name}; valid: mlp)"
        reason = jax_supports(workload, options, self.name)
        if reason:
            return reason
        if options["devices"] > 1 and workload.num_envs % options["devices"]:
            return f"num_envs={workload.num_envs} must be a multiple of devices={options['devices']}"
        rollout = options["batch_size"] * options["num_minibatches"]
        if rollout % workload.num_envs:
            return (f"batch_size x num_minibatches = {rollout} must be a multiple of num_envs={workload.num_envs} "
                    f"(Brax's PPO)")
        return _common_supports(workload, options, self.name, playground=True)

    def open(self, workload, options):
        return BraxPPOSession(workload, options)
