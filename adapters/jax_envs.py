"""JAX on the accelerator: `gymnax`, `purejaxrl-ppo` and `envpool-xla`.

Everything a unit does runs inside one ahead-of-time compiled XLA program, compiled in `open()` (`compile_s`,
never in a rate); every `step()` ends in `block_until_ready`. JAX's settings are set in `open()` before the
first `import jax`. How they are built: docs/strategies/jax.md, "How the JAX adapters are built".
"""
import importlib.util
import math
import os
from time import perf_counter

from adapters._kit.jax_cnn import CNN_POLICIES, cnn_network, cnn_refusal, policy_input, space_shape, space_text
from adapters._kit.jax_env import GYMNAX_NAMES, action_kind, flat, load
from adapters._kit.jax_policy import (
    factored_actions,
    factored_logits,
    greedy_actions,
    head_size,
    make_actor,
    masked,
    mlp_apply,
    mlp_init,
)
from adapters._kit.jax_runtime import (
    JAX_OPTIONS,
    JAX_POLICIES,
    CompiledScan,
    compile_ahead,
    jax_supports,
    pick_devices,
    place,
    sharded,
    start_jax,
    unaliased,
)
from adapters._kit.learner_stats import TargetRun
from adapters._kit.native import envpool_native, gymnax_native
from adapters._kit.ppo import (
    CLIP_COEF,
    ENT_COEF,
    ENT_COEF_GAUSSIAN,
    HISTORY,
    ITERATION_OPTIONS,
    MAX_GRAD_NORM,
    NORM_CLIP,
    VF_COEF,
)
from rlbench.api import (
    Adapter,
    Option,
    Unsupported,
    build_user_env,
    env_and_params,
    env_api,
    env_info,
    envpool_kwargs,
    jax_env_api,
    jax_env_apis,
    register,
)
from rlbench.api import spaces as env_spaces

JAX_APIS = tuple(api.name for api in jax_env_apis())   # every registered JAX env API runs here, plug-ins' too
ENV_API = Option("env_api", str, "auto", "a user's JAX env's API (auto: detected; declare it for an env offering both)",
                 choices=("auto", *JAX_APIS))

COPY_MIB_CPU, COPY_MIB_ACCELERATOR = 64, 1024  # past the CPU caches / past an accelerator's L2
GYMNAX_POLICIES = (*JAX_POLICIES, *CNN_POLICIES)   # the CNNs (flax) on pixel envs: gymnax and purejaxrl-ppo only


def copy_gbps(jax, devices, mib: int, repeats: int = 5) -> float:
    """The devices' own copy bandwidth, measured here: a compiled x + 1 over `mib` MiB of float32 split
    across them (each byte read once and written once), median of blocked calls, in GB/s."""
    import numpy as np
    from jax.sharding import PartitionSpec as P
    n = mib * 2**20 // 4 // len(devices) * len(devices)
    x = place(jax, np.zeros(n, np.float32), devices, split=True)
    run, _ = compile_ahead(jax, sharded(jax, lambda a: a + 1.0, devices, (P("d"),), P("d")), x, donate=())
    jax.block_until_ready(run(x))
    times = []
    for _ in range(repeats):
        t0 = perf_counter()
        jax.block_until_ready(run(x))
        times.append(perf_counter() - t0)
    return 2 * n * 4 / float(np.median(times)) / 1e9


def _gymnax_supports(workload, adapter, options):
    """gymnax runs rlbench's CartPole-v1, a plain gymnasium id gymnax registers too (read from
    gymnax.registered_envs) with no env_kwargs, and a user's JAX env (`module:factory`) with its arguments, its
    actions a discrete space or a bounded box."""
    info = env_info(workload.env_id)
    if info.family == "custom":
        if env_api(workload.env_id, workload.env_kwargs) == "gymnasium":
            return (f"{adapter} runs JAX envs: {workload.env_id} builds a gymnasium.Env (a factory returning a JAX "
                    f"env with one of the APIs {', '.join(JAX_APIS)} runs here)")
        declared = options["env_api"]
        if declared != "auto" and declared != env_api(workload.env_id, workload.env_kwargs) and \
                not _offers(workload, declared):
            return f"env_api={declared}: {workload.env_id} has no {declared} API"
        kind = action_kind(env_spaces(workload.env_id, workload.env_kwargs)[1])
    elif workload.env_id not in GYMNAX_NAMES:
        if info.family != "gymnasium":
            return (f"gymnax has no {workload.env_id} (valid: {', '.join(GYMNAX_NAMES)}, a registered gymnasium "
                    f"id gymnax has too, e.g. Acrobot-v1, or a JAX env as module:factory)")
        reason = gymnax_native(workload, adapter)
        if reason:
            return reason
        kind = type(env_spaces(workload.env_id)[1]).__name__  # gymnax's env of the same id: the same kind
    else:
        kind = "Discrete"
    if kind not in ("Discrete", "MultiDiscrete", "Box"):
        return f"{kind} actions: {adapter} carries Discrete, MultiDiscrete, Box only ({workload.env_id})"
    if workload.env_kwargs and info.family != "custom":
        return f"{adapter} takes no env_kwargs for {workload.env_id} (got {', '.join(workload.env_kwargs)})"
    return None


def _cnn_supports(workload, adapter):
    """Why the workload's CNN policy (cnn, cnn:impala) cannot take the env's observation, in one line naming the
    size needed and got; None for any other policy, or an image the CNN takes (rank 3, each side at least 36 for
    the Nature CNN), read from the env's declared observation space."""
    name = workload.policy.name
    if name not in CNN_POLICIES:
        return None
    if importlib.util.find_spec("flax") is None:
        return f"policy {name} on {adapter} is a flax network: flax is not installed"
    space = env_spaces(workload.env_id, workload.env_kwargs)[0]
    return cnn_refusal(name, space_shape(space), space_text(space))


def _offers(workload, api) -> bool:
    """Whether the user's env has `api`'s methods too (an env may offer several; env_api names the first the
    registered APIs detect)."""
    env = env_and_params(build_user_env(workload.env_id, **workload.env_kwargs))[0]
    return jax_env_api(api).detect(env)


def _titles() -> str:
    """The registered JAX env APIs' owners, as a sentence lists them: "gymnax's, Jumanji's, ... or gxm's"."""
    titles = [api.title for api in jax_env_apis()]
    return " or ".join([", ".join(titles[:-1]), titles[-1]]) if len(titles) > 1 else "".join(titles)


# -- gymnax: vmapped envs in a jitted scan --------------------------------------------------------------

class GymnaxSession(CompiledScan):
    """One unit: `scan_T` steps of all num_envs envs, policy included, one compiled call."""
    returns_at = 3

    def __init__(self, workload, options):
        jax, settings = start_jax(options)
        import jax.numpy as jnp
        self.jax = jax
        devices = pick_devices(jax, workload, options, workload.num_envs, "num_envs")
        env = load(jax, workload, options["env_api"])
        T, n = options["scan_T"], workload.num_envs
        shape, to_input = policy_input(jax, workload, env)   # flat floats for mlp, the image for a CNN
        params, act = make_actor(jax, workload, shape, env.action)
        step_env = jax.vmap(env.step)
        legal = jax.vmap(env.legal) if env.legal else lambda obs, state: None

        def unit(carry, params):  # one device's envs
            def body(c, _):
                state, obs, key, ret = c
                key, k_act, k_env = jax.random.split(key[0], 3)
                actions = act(params, to_input(obs), k_act, legal(obs, state))
                obs, state, reward, _ = step_env(jax.random.split(k_env, ret.shape[0]), state, actions)
                return (state, obs, key[None], ret + reward), None
            return jax.lax.scan(body, carry, None, length=T)[0]

        d = len(devices)
        keys = jax.random.split(jax.random.PRNGKey(workload.seed), n + d)
        obs, state = jax.vmap(env.reset)(keys[:n])
        carry = (state, obs, keys[n:], jnp.zeros((n,), jnp.float32))  # one loop key per device
        compile_s = self.compile(unit, carry, params, devices)
        self.per_unit, self.T = T * n, T
        self.info = {"compile_s": compile_s, "device": devices[0].platform, "workers": d, "env_api": env.api,
                     "device_settings": {**settings, "devices": d}}
        # the carry (env state, obs, keys, returns) is read and written once per step: the least memory
        # traffic of the loop, set against what the same devices copy per second
        self.carry_bytes = sum(leaf.nbytes for leaf in jax.tree.leaves(self.carry))
        self.obs_bytes = env.obs_bytes   # one env's (rlbench tune's profile of a JAX env reads both)
        self.copy_gbps = copy_gbps(
            jax, devices, COPY_MIB_CPU if devices[0].platform == "cpu" else COPY_MIB_ACCELERATOR)
        self.unit_cost = self.unit_cost_us()
        self.units = 0
        self.metrics = self

    def step(self) -> int:
        self.units += 1
        return super().step()

    def reset(self):
        self.mark = self.units

    def read(self, seconds):
        units = self.units - self.mark
        state_gbps = units * self.T * 2 * self.carry_bytes / seconds / 1e9
        return {"device_copy_gbps": self.copy_gbps, "state_gb_per_s": state_gbps,
                "state_bw_frac": state_gbps / self.copy_gbps, "unit_cost_us": self.unit_cost,
                "unit_cost_frac": self.unit_cost * 1e-6 * units / seconds}


@register
class Gymnax(Adapter):
    name = "gymnax"
    kind = "vector_env"
    description = (f"JAX envs (gymnax's, or yours with {_titles()} API): "
                   "vmap over num_envs, lax.scan over scan_T steps, policy inside, AOT-compiled")
    requires = ("jax", "gymnax")
    jax_env_apis = JAX_APIS
    unit_option = "scan_T"
    options = (Option("scan_T", int, 128, "env steps per unit (one lax.scan; each of num_envs envs)", low=1),
               ENV_API, *JAX_OPTIONS)

    def supports(self, workload, options):
        if options["devices"] > 1 and workload.num_envs % options["devices"]:
            return f"num_envs={workload.num_envs} must be a multiple of devices={options['devices']}"
        return _gymnax_supports(workload, self.name, options) or _cnn_supports(workload, self.name) or \
            jax_supports(workload, options, self.name, GYMNAX_POLICIES)

    def tune_space(self, num_envs: int, cpus: int) -> list:
        """scan length: longer amortises the call, shorter keeps the carry in cache."""
        return [{"scan_T": t} for t in (32, 128, 512)]

    def open(self, workload, options):
        return GymnaxSession(workload, options)


# -- purejaxrl-ppo: PPO compiled end to end, num_agents runs vmapped ------------------------------------

CLIP_EPS = CLIP_COEF["vector"]  # CleanRL's hyperparameters (PureJaxRL's CartPole recipe uses the same)
LOG_2PI = math.log(2 * math.pi)
NORM_EPS = 1e-8                   # gymnasium's NormalizeObservation / NormalizeReward epsilon
PPO_POLICIES = ("mlp", *CNN_POLICIES)   # the networks it trains: an MLP actor and critic, or a CNN shared by both


def build_ppo(jax, workload, options, platform: str = ""):
    """(init(key) -> train state, update(train state) -> (train state, mean return of the agent's last
    HISTORY finished episodes, nan before the first), the env's API) for one agent,
    PureJaxRL's recipes: separate tanh MLP actor and critic, Adam with a clipped global norm, GAE, clipped
    policy and value losses, epochs of shuffled minibatches; the envs start again inside the step. Discrete
    actions: a categorical (within the env's legal actions), ppo.py's recipe; multi-discrete ones a categorical per
    component (each within its legal choices), their log-probabilities and entropies summed, as CleanRL's
    ppo_multidiscrete.py does. Box actions: ppo_continuous_action.py's
    diagonal Gaussian (a learned log std, zeros at the start; actions clipped to the box as they go to the env;
    no entropy bonus) on normalized observations and rewards (clipped to +-10), as cleanrl-ppo trains a Box env.
    Policy cnn or cnn:impala: one CNN torso (adapters/_kit/jax_cnn.py) on the observation in its own shape, shared
    by the actor's and the critic's linear heads, as PureJaxRL's and CleanRL's Atari PPO do (images: never
    normalized); on the CPU (`platform`, else JAX's default) the loss's convolutions are im2col products, which XLA
    differentiates inside the update's loops an order of magnitude faster than its own (jax_cnn.py)."""
    import jax.numpy as jnp
    import optax
    env = load(jax, workload, options["env_api"])
    gaussian, factored = env.action[0] == "box", env.action[0] == "multidiscrete"
    n, T = workload.num_envs, options["num_steps"]
    epochs, n_mb = options["update_epochs"], options["num_minibatches"]
    gamma, lam = options["gamma"], options["gae_lambda"]
    batch = n * T
    num_updates = max(options["total_timesteps"] // batch, 1)
    hidden = list(workload.policy.hidden)
    obs_dim = env.obs_dim
    n_out = head_size(env.action)
    ent_coef = ENT_COEF_GAUSSIAN if gaussian else ENT_COEF
    obs_leaves = jax.tree.leaves(jax.eval_shape(env.reset, jax.random.PRNGKey(0))[0])
    cnn = workload.policy.name in CNN_POLICIES
    normalize = gaussian and not cnn and all(jnp.issubdtype(leaf.dtype, jnp.floating) for leaf in obs_leaves)
    if cnn:
        shape, to_input = policy_input(jax, workload, env)
        cnn_init, cnn_apply = cnn_network(jax, workload.policy.name, shape, ppo_heads(n_out))
        learn_apply = cnn_network(jax, workload.policy.name, shape, ppo_heads(n_out),
                                  patches=(platform or jax.default_backend()) == "cpu")[1]

    def lr(count):
        if not options["anneal_lr"]:
            return options["lr"]
        return options["lr"] * jnp.maximum(1.0 - (count // (epochs * n_mb)) / num_updates, 0.0)

    tx = optax.chain(optax.clip_by_global_norm(MAX_GRAD_NORM), optax.adam(lr, eps=1e-5))
    step_env = jax.vmap(env.step)
    legal = jax.vmap(env.legal) if env.legal else lambda obs, state: None
    to_env = (lambda a: jnp.clip(a, env.action[1].ravel(), env.action[2].ravel()).reshape(
        n, *env.action[1].shape).astype(env.action[1].dtype)) if gaussian else \
        (lambda a: factored_actions(a, env.action)) if factored else (lambda a: a)

    def net(params, obs, learn=False):
        """(actor's outputs, values); `learn`: in the loss (differentiated)."""
        if cnn:
            out, value = (learn_apply if learn else cnn_apply)(params["net"], to_input(obs))
            return out, value[:, 0]
        obs = flat(jax, obs)
        return mlp_apply(jax, params["actor"], obs), mlp_apply(jax, params["critic"], obs)[:, 0]

    def policy(params, out, mask):
        """(sample(key) -> actions, log_prob(actions), mean entropy) of the distribution the actor's `out` gives."""
        if gaussian:
            log_std = params["log_std"]
            entropy = (log_std + 0.5 * (1.0 + LOG_2PI)).sum()
            return (lambda k: out + jnp.exp(log_std) * jax.random.normal(k, out.shape),
                    lambda a: (-0.5 * ((a - out) / jnp.exp(log_std)) ** 2 - log_std - 0.5 * LOG_2PI).sum(-1), entropy)
        if factored:   # (batch, components, choices): a categorical per component
            logp_each = jax.nn.log_softmax(factored_logits(jax, out, env.action[1], mask))
            return (lambda k: jax.random.categorical(k, logp_each),
                    lambda a: jnp.take_along_axis(logp_each, a[..., None], -1)[..., 0].sum(-1),
                    -(jnp.exp(logp_each) * logp_each).sum((-2, -1)).mean())
        logp_all = jax.nn.log_softmax(masked(jax, out, mask))
        return (lambda k: jax.random.categorical(k, logp_all),
                lambda a: jnp.take_along_axis(logp_all, a[:, None], 1)[:, 0],
                -(jnp.exp(logp_all) * logp_all).sum(-1).mean())

    def seen(norm, obs, reward=None, done=None):
        """A Box env's observations (and rewards) as the learner trains on them: normalized by running statistics
        the batch updates first (gymnasium's NormalizeObservation / NormalizeReward); as they are otherwise."""
        if not normalize:
            return norm, obs, reward
        obs_rms = rms_update(jax, norm["obs"], flat(jax, obs))
        obs = jnp.clip((flat(jax, obs) - obs_rms[0]) / jnp.sqrt(obs_rms[1] + NORM_EPS), -NORM_CLIP, NORM_CLIP)
        if reward is None:
            return {**norm, "obs": obs_rms}, obs, None
        returns = norm["returns"] * gamma * (1.0 - done) + reward
        ret_rms = rms_update(jax, norm["ret"], returns[:, None])
        reward = jnp.clip(reward / jnp.sqrt(ret_rms[1][0] + NORM_EPS), -NORM_CLIP, NORM_CLIP)
        return {"obs": obs_rms, "ret": ret_rms, "returns": returns}, obs, reward

    def init(key):
        k_a, k_c, k_env, key = jax.random.split(key, 4)
        params = {"net": cnn_init(k_a)} if cnn else \
            {"actor": mlp_init(jax, k_a, [obs_dim, *hidden, n_out], out_scale=0.01),
             "critic": mlp_init(jax, k_c, [obs_dim, *hidden, 1])}
        if gaussian:
            params["log_std"] = jnp.zeros((n_out,), jnp.float32)
        obs, state = jax.vmap(env.reset)(jax.random.split(k_env, n))
        norm = {"obs": rms_init(jax, obs_dim), "ret": rms_init(jax, 1), "returns": jnp.zeros((n,), jnp.float32)} \
            if normalize else {}
        norm, obs, _ = seen(norm, obs)
        return {"params": params, "opt": tx.init(params), "env": state, "obs": obs, "key": key, "norm": norm,
                "ep_ret": jnp.zeros((n,), jnp.float32), "hist": jnp.zeros((HISTORY,), jnp.float32),
                "episodes": jnp.int32(0)}

    def rollout_step(c, _):
        params, state, obs, key, norm, (ep_ret, hist, episodes) = c
        key, k_act, k_env = jax.random.split(key, 3)
        out, value = net(params, obs)
        mask = legal(obs, state)
        sample, log_prob, _ = policy(params, out, mask)
        action = sample(k_act)
        next_obs, state, reward, done = step_env(jax.random.split(k_env, n), state, to_env(action))
        ep_ret = ep_ret + reward
        slot = (episodes + jnp.cumsum(done) - 1) % HISTORY   # finished episodes go into a ring
        hist = hist.at[jnp.where(done, slot, HISTORY)].set(ep_ret, mode="drop")
        episodes = episodes + done.sum(dtype=jnp.int32)
        ep_ret = jnp.where(done, 0.0, ep_ret)
        norm, next_obs, reward = seen(norm, next_obs, reward, done.astype(jnp.float32))
        return (params, state, next_obs, key, norm, (ep_ret, hist, episodes)), (obs, mask, action, log_prob(action),
                                                                                value, reward, done)

    def gae(traj, last_value):
        _, _, _, _, value, reward, done = traj

        def back(c, x):
            adv, next_value = c
            v, r, d = x
            nonterminal = 1.0 - d
            delta = r + gamma * next_value * nonterminal - v
            adv = delta + gamma * lam * nonterminal * adv
            return (adv, v), adv
        _, advantages = jax.lax.scan(back, (jnp.zeros_like(last_value), last_value),
                                     (value, reward, done.astype(jnp.float32)), reverse=True)
        return advantages, advantages + value

    def loss_fn(params, mb):
        obs, mask, action, logp_old, value_old, adv, target = mb
        out, value = net(params, obs, learn=True)
        _, log_prob, entropy = policy(params, out, mask)
        v_clipped = value_old + jnp.clip(value - value_old, -CLIP_EPS, CLIP_EPS)
        v_loss = 0.5 * jnp.maximum((value - target) ** 2, (v_clipped - target) ** 2).mean()
        ratio = jnp.exp(log_prob(action) - logp_old)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        pg = -jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - CLIP_EPS, 1 + CLIP_EPS) * adv).mean()
        return pg + VF_COEF * v_loss - ent_coef * entropy

    def update(ts):
        carry = (ts["params"], ts["env"], ts["obs"], ts["key"], ts["norm"], (ts["ep_ret"], ts["hist"], ts["episodes"]))
        (params, state, obs, key, norm, (ep_ret, hist, episodes)), traj = jax.lax.scan(rollout_step, carry, None,
                                                                                       length=T)
        advantages, targets = gae(traj, net(params, obs)[1])
        obs_t, mask, action, logp, value, _, _ = traj
        data = (obs_t, mask, action, logp, value, advantages, targets)
        data = jax.tree.map(lambda x: x.reshape(batch, *x.shape[2:]), data)

        def epoch(c, _):
            params, opt, key = c
            key, k_perm = jax.random.split(key)
            perm = jax.random.permutation(k_perm, batch)
            mbs = jax.tree.map(lambda x: x[perm].reshape(n_mb, batch // n_mb, *x.shape[1:]), data)

            def minibatch(c, mb):
                params, opt = c
                grads = jax.grad(loss_fn)(params, mb)
                updates, opt = tx.update(grads, opt, params)
                return (optax.apply_updates(params, updates), opt), None
            (params, opt), _ = jax.lax.scan(minibatch, (params, opt), mbs)
            return (params, opt, key), None
        (params, opt, key), _ = jax.lax.scan(epoch, (params, ts["opt"], key), None, length=epochs)
        new = {"params": params, "opt": opt, "env": state, "obs": obs, "key": key, "norm": norm,
               "ep_ret": ep_ret, "hist": hist, "episodes": episodes}
        kept = jnp.minimum(episodes, HISTORY)
        mean_return = jnp.where(kept > 0, jnp.where(jnp.arange(HISTORY) < kept, hist, 0.0).sum() / jnp.maximum(kept, 1),
                                jnp.nan)
        return new, mean_return

    return init, update, env.api


def ppo_heads(n_out: int) -> tuple:
    """The CNN actor-critic's heads on its shared torso: (name, outputs, orthogonal gain), CleanRL's Atari PPO's."""
    return (("actor", n_out, 0.01), ("critic", 1, 1.0))


def rms_init(jax, size: int):
    """gymnasium's RunningMeanStd at the start: mean 0, variance 1, a count of 1e-4."""
    import jax.numpy as jnp
    return jnp.zeros((size,), jnp.float32), jnp.ones((size,), jnp.float32), jnp.float32(1e-4)


def rms_update(jax, rms, x):
    """RunningMeanStd updated by a batch (rows of `x`): the parallel combination of two means and variances."""
    mean, var, count = rms
    batch_mean, batch_var, batch_count = x.mean(0), x.var(0), x.shape[0]
    delta, total = batch_mean - mean, count + batch_count
    m2 = var * count + batch_var * batch_count + delta ** 2 * count * batch_count / total
    return mean + delta * batch_count / total, m2 / total, total


def greedy_return(jax, workload, params, num_envs=32, seed=12345, steps=None, api="auto"):
    """Mean undiscounted return of the first episode of num_envs fresh envs under the greedy (argmax)
    actor: an evaluation separate from training (CartPole-v1 caps episodes at 500 steps)."""
    import jax.numpy as jnp
    env = load(jax, workload, api)
    steps = steps or env.episode_steps
    obs, state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(seed), num_envs))
    if workload.policy.name in CNN_POLICIES:
        shape, to_input = policy_input(jax, workload, env)
        apply = cnn_network(jax, workload.policy.name, shape, ppo_heads(head_size(env.action)))[1]
        actor = lambda obs: apply(params["net"], to_input(obs))[0]   # noqa: E731
    else:
        actor = lambda obs: mlp_apply(jax, params["actor"], flat(jax, obs))   # noqa: E731

    def body(c, key):
        state, obs, ret, alive = c
        legal = jax.vmap(env.legal)(obs, state) if env.legal else None
        action = greedy_actions(jax, actor(obs), env.action, legal)
        obs, state, r, done = jax.vmap(env.step)(jax.random.split(key, num_envs), state, action)
        ret = ret + r * alive
        return (state, obs, ret, alive * (1.0 - done)), None
    init = (state, obs, jnp.zeros(num_envs), jnp.ones(num_envs))
    (_, _, ret, _), _ = jax.jit(lambda c, ks: jax.lax.scan(body, c, ks))(
        init, jax.random.split(jax.random.PRNGKey(seed + 1), steps))
    return float(ret.mean())


class PPOSession(TargetRun):
    """One unit: `updates_per_unit` PPO iterations of every agent (each: num_steps x num_envs env steps,
    GAE, update_epochs x num_minibatches Adam steps), one compiled call."""

    def __init__(self, workload, options):
        jax, settings = start_jax(options)
        from jax.sharding import PartitionSpec as P
        self.jax, self.workload, self.options = jax, workload, options
        agents = options["num_agents"]
        devices = pick_devices(jax, workload, options, agents, "num_agents")
        init, update, api = build_ppo(jax, workload, options, devices[0].platform)
        K = options["updates_per_unit"]

        def unit(ts):  # one device's agents, K iterations
            def body(ts, _):
                return jax.vmap(update)(ts)
            return jax.lax.scan(body, ts, None, length=K)  # returns: [K, agents]

        ts = jax.vmap(init)(jax.random.split(jax.random.PRNGKey(workload.seed), agents))
        self.ts = unaliased(jax, place(jax, ts, devices, split=True))
        fn = sharded(jax, unit, devices, (P("d"),), (P("d"), P(None, "d")))
        self.run, compile_s = compile_ahead(jax, fn, self.ts)
        self.agents, self.K = agents, K
        # Adam steps per iteration and agent, as cleanrl-ppo, sb3-ppo and brax-ppo count updates
        self.adam_steps_per_iter = options["update_epochs"] * options["num_minibatches"]
        self.per_agent_iter = workload.num_envs * options["num_steps"]
        self.per_unit = self.per_agent_iter * agents * K
        self.returns = None
        self.iterations = 0
        self.t_start = self.t_last = None
        self.metrics = self
        self.info = {"compile_s": compile_s, "device": devices[0].platform, "workers": len(devices),
                     "batch_size": workload.num_envs * options["num_steps"], "env_api": api,
                     "device_settings": {**settings, "devices": len(devices)}}

    def step(self) -> int:
        if self.t_start is None:
            self.t_start = self.t_last = perf_counter()
        self.ts, self.returns = self.run(self.ts)
        self.jax.block_until_ready((self.ts, self.returns))
        now = perf_counter()
        if self.return_first is None:
            self._first_return()
        if self.time_to_target is None:
            self._check_target(now)
        self.iterations += self.K
        self.t_last = now
        return self.per_unit

    def _first_return(self):
        """The first iteration's mean return over agents once every agent has finished an episode (nan before)."""
        import numpy as np
        means = np.asarray(self.returns).mean(axis=1)
        finite = np.flatnonzero(np.isfinite(means))
        if finite.size:
            self.started_at(float(means[finite[0]]))

    def _check_target(self, now):
        """First iteration whose mean return over agents reached the target; inside a unit of K
        iterations its time is interpolated (iterations take equal time)."""
        import numpy as np
        means = np.asarray(self.returns).mean(axis=1)
        hit = np.flatnonzero(means >= self.options["target_return"])
        if hit.size:
            i = int(hit[0]) + 1
            self.time_to_target = self.t_last - self.t_start + (now - self.t_last) * i / self.K
            self.steps_to_target = (self.iterations + i) * self.per_agent_iter

    def drain(self):
        self.jax.block_until_ready((self.ts, self.returns))

    def return_mean(self) -> float:
        """Mean over agents of each one's mean return over its last 100 finished episodes (nan until each has one)."""
        return float(self.returns[-1].mean()) if self.returns is not None else float("nan")

    def agent_returns(self):
        import numpy as np
        return np.asarray(self.returns[-1])

    def params(self, agent=0):
        return self.jax.tree.map(lambda x: x[agent], self.ts["params"])

    # -- metrics over the timed window --
    def reset(self):
        self.mark = self.iterations

    def read(self, seconds):
        iterations = self.iterations - self.mark
        sps = iterations * self.per_agent_iter * self.agents / seconds
        return {"updates_per_s": iterations * self.adam_steps_per_iter * self.agents / seconds,
                "return_mean": self.return_mean(), "return_first": self.return_first,
                "time_to_target_s": self.time_to_target, "steps_to_target": self.steps_to_target,
                "time_per_agent_s": self.options["total_timesteps"] / sps if sps else None}

    def close(self):
        self.ts = self.returns = self.run = None


@register
class PureJaxRLPPO(Adapter):
    name = "purejaxrl-ppo"
    kind = "learner"
    algo = "ppo"
    description = ("PureJaxRL-style PPO compiled end to end (rollout, GAE, minibatch epochs in one program; a "
                   "categorical for Discrete actions, a Gaussian on normalized observations and rewards for Box; an "
                   "MLP, or on pixel envs a CNN torso shared by actor and critic); "
                   "num_agents independent runs vmapped")
    requires = ("jax", "gymnax", "optax")
    jax_env_apis = JAX_APIS
    options = (
        Option("num_agents", int, 1, "independent training runs (seeds), vmapped in one program", low=1),
        *ITERATION_OPTIONS,
        Option("total_timesteps", int, 500_000, "env steps per agent of one training run (annealing; "
                                                "time_per_agent_s is for a run this long)", low=1),
        Option("target_return", float, 475.0, "mean return counted as solved (time_to_target_s)", low=-math.inf),
        Option("updates_per_unit", int, 1, "PPO iterations per compiled call (one unit)", low=1),
        ENV_API, *JAX_OPTIONS,
    )

    def supports(self, workload, options):
        if workload.policy.name not in PPO_POLICIES:
            return (f"purejaxrl-ppo trains the policy: needs policy {', '.join(PPO_POLICIES[:-1])} or "
                    f"{PPO_POLICIES[-1]} (got {workload.policy.name})")
        batch = workload.num_envs * options["num_steps"]
        if batch % options["num_minibatches"]:
            return (f"num_envs x num_steps = {batch} must be a multiple of "
                    f"num_minibatches={options['num_minibatches']}")
        if options["devices"] > 1 and options["num_agents"] % options["devices"]:
            return f"num_agents={options['num_agents']} must be a multiple of devices={options['devices']}"
        return _gymnax_supports(workload, self.name, options) or _cnn_supports(workload, self.name) or \
            jax_supports(workload, options, self.name, PPO_POLICIES)

    def open(self, workload, options):
        return PPOSession(workload, options)

    def tune_space(self, num_envs, cpus):
        return [{"updates_per_unit": 10}]   # ten iterations a compiled call: a unit of a few hundred ms on CartPole

    def collector(self, options):
        return "gymnax", ({} if options["env_api"] == "auto" else {"env_api": options["env_api"]})


# -- envpool-xla: EnvPool's C++ pool called from inside a jitted loop -----------------------------------

class EnvPoolXlaSession:
    """One unit: `scan_T` sync steps of the pool (send + recv through EnvPool's XLA custom calls) with
    the policy in JAX, one compiled call; transitions counted inside it (elapsed_step > 0)."""

    def __init__(self, workload, options):
        jax, settings = start_jax(options)
        import envpool
        import jax.numpy as jnp
        import numpy as np
        self.jax = jax
        devices = pick_devices(jax, workload, {**options, "devices": 1}, 1, "num_envs")
        n = workload.num_envs
        self.env = envpool.make(workload.env_id, env_type="gymnasium", num_envs=n, batch_size=n,
                                num_threads=options["num_threads"], seed=workload.seed,
                                **envpool_kwargs(workload.env_id), **workload.env_kwargs)
        # EnvPool's custom calls read and write its C++ specs' dtypes: a MuJoCo env's float64 actions and observations
        # handed over as JAX's default float32 are half the bytes it reads (heap corruption, SIGABRT). A discrete
        # action is an int32 there, whatever the gymnasium space says (int64)
        wide = any(np.dtype(sp.dtype) == np.float64 for sp in (self.env.action_space, self.env.observation_space))
        if wide:
            jax.config.update("jax_enable_x64", True)
        try:
            handle, recv, send, _ = self.env.xla()
        except Exception as exc:  # EnvPool's XLA needs a JAX whose FFI it was built against
            raise Unsupported(f"envpool {envpool.__version__} XLA interface unavailable with jax "
                              f"{jax.__version__}: {type(exc).__name__}: {exc}") from None
        space = self.env.action_space
        if hasattr(space, "n"):
            action = ("discrete", int(space.n))
        else:
            low = np.where(np.isfinite(space.low), space.low, -1.0).astype(space.dtype)
            high = np.where(np.isfinite(space.high), space.high, 1.0).astype(space.dtype)
            action = ("box", low, high)
        params, act = make_actor(jax, workload, self.env.observation_space.shape, action)
        T = options["scan_T"]

        def unit(handle, obs, env_id, key, params):
            def body(c, _):
                handle, obs, env_id, key, count = c
                key, k_act = jax.random.split(key)
                handle = send(handle, act(params, obs, k_act), env_id)  # each action to the env it is for
                handle, (obs, _, _, _, info) = recv(handle)
                made = jnp.count_nonzero(info["elapsed_step"]).astype(jnp.int32)   # int64 under x64
                return (handle, obs, info["env_id"], key, count + made), None
            carry = (handle, obs, env_id, key, jnp.int32(0))
            (handle, obs, env_id, key, count), _ = jax.lax.scan(body, carry, None, length=T)
            return handle, obs, env_id, key, count

        self.env.async_reset()
        self.handle, (obs, _, _, _, info) = jax.jit(recv)(handle)   # the reset observations
        self.carry = (obs, info["env_id"], jax.random.PRNGKey(workload.seed))
        self.params = params
        self.run, compile_s = compile_ahead(jax, unit, self.handle, *self.carry, self.params, donate=())
        self.count = None
        workers = options["num_threads"] or min(n, os.cpu_count() or 1)
        self.info = {"compile_s": compile_s, "device": devices[0].platform, "workers": workers, "batch_size": n,
                     "device_settings": {**settings, "devices": 1, "x64": wide}}

    def step(self) -> int:
        self.handle, *carry, self.count = self.run(self.handle, *self.carry, self.params)
        self.carry = tuple(carry)
        return int(self.count)  # reading the count waits for the unit

    def drain(self):
        self.jax.block_until_ready((self.handle, self.carry))

    def close(self):
        self.run = None
        self.env.close()


@register
class EnvPoolXla(Adapter):
    name = "envpool-xla"
    kind = "vector_env"
    description = "EnvPool's XLA interface: the C++ pool's send/recv called from a jitted lax.scan, policy in JAX"
    requires = ("jax", "envpool")
    unit_option = "scan_T"
    options = (Option("scan_T", int, 128, "env steps per unit (one lax.scan of send + recv)", low=1),
               Option("num_threads", int, 0, "pool threads; 0 = EnvPool default, min(num_envs, hardware threads)"),
               *(o for o in JAX_OPTIONS if o.name != "devices"))  # one pool, one program, one device

    def supports(self, workload, options):
        return envpool_native(workload, self.name) or jax_supports(workload, options, self.name)

    def open(self, workload, options):
        return EnvPoolXlaSession(workload, options)
