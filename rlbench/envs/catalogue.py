"""The envs rlbench knows, named as EnvPool names them (its native ids, Atari games, DeepMind Control tasks, its
synthetic envs), and `env_info`: what any env id names, the user's included (a registered gymnasium id,
`module:EnvId-v0`, a factory, any of them wrapped)."""
import importlib.util
import math
import os
import re
from dataclasses import dataclass, field

from rlbench.envs import users
from rlbench.errors import UsageError

ATARI_ID = re.compile(r"^([A-Z][A-Za-z0-9]*)-v5$")
ATARI = {"frameskip": 4, "noop_max": 30, "screen": 84, "stack": 4}
USER_FAMILIES = ("gymnasium", "custom")  # envs rlbench did not write: kwargs as given, spaces probed
WRAP = "+"  # base env id + wrapper + wrapper: how a wrapped env is named (in cell ids too)


@dataclass(frozen=True)
class EnvInfo:
    env_id: str
    family: str                 # classic | atari | mujoco | synthetic | brax | dm_control | gymnasium | custom
    frameskip: int = 1          # frames = env steps x frameskip
    kwargs: dict = field(default_factory=dict)   # allowed env_kwargs -> default; None: any (the user's env)
    native: tuple = ()          # families that implement the env natively besides gymnasium
    choices: dict = field(default_factory=dict)  # env_kwargs with a fixed set of values -> that set
    ranges: dict = field(default_factory=dict)   # numeric env_kwargs -> (low, high), both valid; else >= 0
    wrappers: tuple = ()        # the user's wrappers (module:fn), applied in this order to every env built

    @property
    def probed(self) -> bool:
        """Whether its spaces are read from a built instance: envs rlbench did not write, and any wrapped env
        (a wrapper may change them)."""
        return self.family in USER_FAMILIES or bool(self.wrappers)


ENVS = {
    "CartPole-v1": EnvInfo("CartPole-v1", "classic", native=("envpool",)),
    "Ant-v4": EnvInfo("Ant-v4", "mujoco", frameskip=5, native=("envpool",)),
    "HalfCheetah-v4": EnvInfo("HalfCheetah-v4", "mujoco", frameskip=5, native=("envpool",)),
    "Humanoid-v4": EnvInfo("Humanoid-v4", "mujoco", frameskip=5, native=("envpool",)),
    **{env_id: EnvInfo(env_id, "mujoco", frameskip=skip, native=("envpool",)) for env_id, skip in (
        ("Hopper-v4", 4), ("Walker2d-v4", 4), ("Swimmer-v4", 4), ("InvertedPendulum-v4", 2))},
    # Brax (JAX) envs: brax.envs.get_environment(<name>); no gymnasium or EnvPool counterpart
    "brax/ant": EnvInfo("brax/ant", "brax", frameskip=5),
    "brax/halfcheetah": EnvInfo("brax/halfcheetah", "brax", frameskip=5),
    # DeepMind Control tasks by EnvPool's names (its C++ port of dm_control's files), which MuJoCo Playground steps
    # too (its MJX re-implementation: the same bodies and control step, its own solver settings); frameskip =
    # physics steps per env step, the same on both sides (tests/frameworks/test_playground.py checks both)
    **{env_id: EnvInfo(env_id, "dm_control", frameskip=skip, native=("envpool",)) for env_id, skip in (
        ("CheetahRun-v1", 1), ("HopperHop-v1", 4), ("HopperStand-v1", 4), ("HumanoidRun-v1", 5),
        ("HumanoidStand-v1", 5), ("HumanoidWalk-v1", 5), ("WalkerRun-v1", 10), ("WalkerStand-v1", 10),
        ("WalkerWalk-v1", 10))},
    "rlbench/Synthetic-v0": EnvInfo(
        "rlbench/Synthetic-v0", "synthetic",
        kwargs={"step_cost_us": 0.0, "obs_bytes": 64, "episode_len": 1000, "straggler_p": 0.0, "straggler_x": 10.0},
        ranges={"step_cost_us": (0, math.inf), "obs_bytes": (1, math.inf), "episode_len": (1, math.inf),
                "straggler_p": (0, 1), "straggler_x": (1, math.inf)},
    ),
    # stacked 84x84 uint8 frames (Atari after DQN's preprocessing) with a chosen step cost: the CNN policies'
    # workload where there is no Atari
    "rlbench/Frames-v0": EnvInfo(
        "rlbench/Frames-v0", "synthetic",
        kwargs={"step_cost_us": 0.0, "stack": 4, "size": 84, "layout": "chw", "n_actions": 6, "episode_len": 1000},
        choices={"layout": ("chw", "hwc")},
        ranges={"step_cost_us": (0, math.inf), "stack": (1, 64), "size": (1, 4096), "n_actions": (1, math.inf),
                "episode_len": (1, math.inf)},
    ),
}


def atari_games() -> set:
    """ROM names ale-py or EnvPool's assets ship (e.g. 'pong'), read from their folders without importing
    either (EnvPool runs Atari on its own emulator: its cells need no ale-py)."""
    folders = []
    for package in ("ale_py", "envpool_assets"):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin is not None:
            folders.append(os.path.join(os.path.dirname(spec.origin), *(("roms",) if package == "ale_py"
                                                                         else ("atari", "roms"))))
    if os.environ.get("ENVPOOL_ASSETS_PATH"):  # EnvPool's own override of where its assets are
        folders.append(os.path.join(os.environ["ENVPOOL_ASSETS_PATH"], "atari", "roms"))
    return {f[:-4] for d in folders if os.path.isdir(d) for f in os.listdir(d) if f.endswith(".bin")}


def _rom(env_id: str) -> str:
    """'SpaceInvaders-v5' -> 'space_invaders' (ale-py's ROM naming)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", ATARI_ID.match(env_id).group(1)).lower()


def wrapped_id(env_id: str, wrappers) -> str:
    """The id of `env_id` with the user's wrappers applied in order (`CartPole-v1+pkg.mod:fn`)."""
    return WRAP.join([env_id, *wrappers])


def env_info(env_id: str) -> EnvInfo:
    """What an env id names: an env of ours, an Atari game, a family's own workload (replay/<name>,
    described by that family), or any of these wrapped (`ID+module:fn`): the base env's info, no longer
    native to any framework (EnvPool or gymnax cannot apply a Python wrapper)."""
    from rlbench import registry
    if WRAP in env_id:
        base, *wrappers = env_id.split(WRAP)
        info = env_info(base)
        if registry.family_of_workload(base) is not None or (
                not users.in_a_cell() and info.family == "custom" and not users.builds_gymnasium(base)):
            raise UsageError(f"env '{env_id}': wrappers apply to gymnasium envs, not to {base}")
        for w in wrappers:
            users.wrapper(w)
        return EnvInfo(env_id, info.family, info.frameskip, info.kwargs, (), info.choices, info.ranges,
                       tuple(wrappers))
    if env_id in ENVS:
        return ENVS[env_id]
    family = registry.family_of_workload(env_id)
    if family is not None:
        return family.workload_info(env_id)
    if ATARI_ID.match(env_id) and _rom(env_id) in atari_games():
        return EnvInfo(env_id, "atari", frameskip=ATARI["frameskip"], native=("envpool",))
    if ":" in env_id:
        users.user_target(env_id)  # the module imports and names a factory or a registered id
        return EnvInfo(env_id, "custom", kwargs=None)
    if users.registered(env_id):
        return EnvInfo(env_id, "gymnasium", frameskip=users.registered_frameskip(env_id), kwargs=None)
    own = "".join(f", or a {f.name} workload, e.g. {f.workload_example}" for f in registry.families()
                  if f.workload_prefix)
    ours = sorted(k for k, v in ENVS.items() if v.family != "dm_control")
    dm_control = ", ".join(k for k, v in ENVS.items() if v.family == "dm_control")
    raise UsageError(f"unknown env '{env_id}' (valid: a registered gymnasium id, e.g. Acrobot-v1; "
                     f"module:EnvId-v0; package.module:make_env, e.g. a JAX package's own ids as gymnax:make "
                     f"--env-kwarg env_id=Breakout-MinAtar; {', '.join(ours)}; an Atari game "
                     f"as <Game>-v5, e.g. Pong-v5 (EnvPool's preprocessing), or ALE's own id, e.g. ALE/Pong-v5"
                     f"{'' if atari_games() else ' (ale-py is not installed)'}; "
                     f"a DeepMind Control task: {dm_control}{own})")


def frameskip_of(info: EnvInfo, env_kwargs: dict) -> int:
    """The user's env states its frameskip as an env argument (passed to the env too, as ALE's is), else its
    registered spec does (info.frameskip: 1 for a factory)."""
    return int(env_kwargs.get("frameskip", info.frameskip)) if info.kwargs is None else info.frameskip
