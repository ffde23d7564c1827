"""What is measured: the env, how many copies, which policy picks the actions, and the accounting."""
import math
import re
from dataclasses import asdict, dataclass, field

from rlbench import registry
from rlbench.errors import UsageError

POLICY_FIELDS = {"hidden": tuple, "threads": int, "device": str, "cost_us": float}
NETS = ("mlp", "cnn", "cnn:impala", "lstm")   # the torch networks (adapters/torch_policies.py)
FIELDS_OF = {"random": (), "fixed_cost": ("cost_us",), "mlp": ("hidden", "threads", "device"),
             "cnn": ("threads", "device"), "cnn:impala": ("threads", "device"),
             "lstm": ("hidden", "threads", "device")}   # a policy registered by a plug-in: any field
LSTM_HIDDEN = (512,)  # R2D2's LSTM: 512 units after the torso
POLICY_FORMS = {"hidden": "layer sizes >= 1 like 64x64", "threads": "an integer >= 1",
                "device": "cpu, cuda or cuda:N", "cost_us": "a finite number >= 0"}


USER = "user"  # a user's policy factory, named by import path


@dataclass(frozen=True)
class PolicySpec:
    """`random`, `fixed_cost` (burns cost_us per batch), a torch network (threads, device): `mlp` (hidden
    sizes), `cnn` (Nature DQN), `cnn:impala` (IMPALA ResNet), `lstm` (its units hidden[-1], on the Nature CNN
    for frames or an MLP of the other hidden sizes), or `user`: the factory at `factory` (module:function),
    called with the spaces, the batch size and `kwargs` (sorted (key, value) pairs)."""
    name: str = "random"
    hidden: tuple = (64, 64)
    threads: int = 1
    device: str = "cpu"
    cost_us: float = 0.0
    factory: str = ""
    kwargs: tuple = ()

    @property
    def label(self) -> str:
        if self.name in ("mlp", "lstm"):
            return f"{self.name}{'x'.join(map(str, self.hidden))}-{self.device}-t{self.threads}"
        if self.name in NETS:
            return f"{self.name}-{self.device}-t{self.threads}"
        if self.name == "fixed_cost":
            return f"fixed_cost{self.cost_us:g}us"
        if self.name == USER:
            return self.factory + (f"[{kv_label(dict(self.kwargs))}]" if self.kwargs else "")
        return self.name

    @property
    def device_label(self) -> str:
        if self.name == USER:
            return str(dict(self.kwargs).get("device", "cpu"))
        return self.device if self.name in NETS else "cpu"


def placed(policy: PolicySpec, device: str):
    """The policy on `device`, or None where it cannot be placed: a torch network by its `device` field, a
    user's factory when it takes a `device` keyword (given as its kwargs), anything else never (it has no
    device: random, fixed_cost)."""
    from dataclasses import replace
    if policy.name in NETS:
        return replace(policy, device=device)
    if policy.name == USER and "device" in _keywords(policy.factory):
        return replace(policy, kwargs=tuple(sorted({**dict(policy.kwargs), "device": device}.items())))
    return None


def _keywords(factory: str) -> set:
    import inspect
    try:
        return set(inspect.signature(registry.load_factory(factory, "policy")).parameters)
    except (TypeError, ValueError, UsageError):
        return set()


def parse_policy(raw) -> PolicySpec:
    """Accepts `name`, `name:key=value,key=value` (hidden as 64x64), a user's factory `module:function`
    (its keyword arguments after another colon: `module:function:key=value,...`), or a TOML table
    (`{name = "mlp", hidden = [64, 64]}`, `{factory = "module:function", kwargs = {...}}`)."""
    if isinstance(raw, PolicySpec):
        return raw
    if isinstance(raw, dict) and "factory" in raw:
        return user_policy(raw)
    if isinstance(raw, str) and _is_factory(raw):
        path, _, rest = raw.partition(":")[2].partition(":")
        return user_policy({"factory": f"{raw.partition(':')[0]}:{path}", "kwargs": _kv(raw, rest)})
    if isinstance(raw, str):
        name, rest = _name_and_fields(raw)
        fields = dict(kv.split("=", 1) for kv in rest.split(",") if "=" in kv) if rest else {}
        if rest and any("=" not in kv for kv in rest.split(",")):
            raise UsageError(f"bad policy '{raw}' (expected name:key=value,...)")
    elif isinstance(raw, dict):
        fields = dict(raw)
        name = fields.pop("name", "random")
    else:
        raise UsageError(f"bad policy {raw!r} (expected a string or a table)")
    if name not in registry.policy_names():
        raise UsageError(f"unknown policy '{name}' (valid: {', '.join(registry.policy_names())})")
    kwargs = {}
    valid = FIELDS_OF.get(name, tuple(POLICY_FIELDS))
    for key, value in fields.items():
        if key not in valid:
            raise UsageError(f"unknown policy field '{key}' for policy {name} (valid: {', '.join(valid) or 'none'})")
        kwargs[key] = _policy_field(key, value)
    if name == "lstm":
        kwargs.setdefault("hidden", LSTM_HIDDEN)
    return PolicySpec(name=name, **kwargs)


def _name_and_fields(raw: str):
    """`cnn:impala:device=cuda` -> ('cnn:impala', 'device=cuda'): the longest registered name the string
    starts with (a name may hold a colon), then what follows its colon."""
    for name in sorted(registry.policy_names(), key=len, reverse=True):
        if raw == name or raw.startswith(name + ":"):
            return name, raw[len(name) + 1:]
    name, _, rest = raw.partition(":")
    return name, rest


def _is_factory(raw: str) -> bool:
    """`module:function[:kwargs]`, told from a built-in's `name:key=value` by what follows the colon."""
    name, _, rest = raw.partition(":")
    return bool(rest) and rest.partition(":")[0].isidentifier() and name not in registry.policy_names()


def _kv(raw: str, rest: str) -> dict:
    """key=value pairs, each value read as TOML reads it (4 -> int, true -> bool), else a string."""
    out = {}
    for kv in filter(None, rest.split(",")):
        key, sep, value = kv.partition("=")
        if not sep or not key:
            raise UsageError(f"bad policy '{raw}' (expected module:function or module:function:key=value,...)")
        out[key] = literal(value)
    return out


def cli_text(value) -> str:
    """value as a command line gives it back through `literal`: the plain text where that reads back as the
    same value (4, 0.5, dict), else TOML's inline form ("2048", true, {impl = "jax"}); the inverse of
    `literal` for the commands rlbench prints."""
    plain = str(value)
    back = literal(plain)
    if not isinstance(value, bool) and type(back) is type(value) and back == value:
        return plain
    return _toml(value)


def _toml(value) -> str:
    import json
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k if re.fullmatch(r'[A-Za-z0-9_-]+', str(k)) else json.dumps(str(k))} = "
                               f"{_toml(v)}" for k, v in value.items()) + "}"
    return json.dumps(str(value), ensure_ascii=False)


def literal(raw):
    """A command-line value read as TOML reads it (4 -> int, 0.5 -> float, true -> bool), else the string:
    a user's env or policy argument, typed as the user's code expects without rlbench knowing its keys."""
    import tomllib
    if not isinstance(raw, str):
        return raw
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def user_policy(table: dict) -> PolicySpec:
    """The factory is imported now, so a missing module or function is refused before anything runs."""
    unknown = set(table) - {"factory", "kwargs"}
    if unknown:
        raise UsageError(f"unknown policy field '{sorted(unknown)[0]}' for a factory (valid: factory, kwargs)")
    path, kwargs = table["factory"], table.get("kwargs", {})
    if not isinstance(kwargs, dict):
        raise UsageError(f"policy kwargs = {kwargs!r} must be a table")
    registry.load_factory(path, "policy")
    return PolicySpec(name=USER, factory=path, kwargs=tuple(sorted(kwargs.items())))


def _policy_field(key: str, value):
    """Checked as the suite loads, so a bad policy is refused before any cell runs (a negative cost_us
    would otherwise run, labelled fixed_cost-5us); the message names the value as given and its valid form."""
    try:
        if isinstance(value, bool):
            raise ValueError  # TOML `true` is valid for no field
        if key == "hidden":
            items = value.split("x") if isinstance(value, str) else value
            typed = tuple(_integer(h) for h in items)
            ok = typed and min(typed) >= 1
        elif key == "threads":
            typed = _integer(value)
            ok = typed >= 1
        elif key == "device":
            typed = value
            ok = isinstance(value, str) and re.fullmatch(r"cpu|cuda(:\d+)?", value)
        else:
            typed = float(value)
            ok = math.isfinite(typed) and typed >= 0
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise UsageError(f"policy field {key}={value!r} must be {POLICY_FORMS[key]}")
    return typed


def _integer(value) -> int:
    """int(), but 1.5 and true are refused rather than truncated."""
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError
    return int(value)


@dataclass(frozen=True)
class Workload:
    env_id: str
    num_envs: int
    policy: PolicySpec = PolicySpec()
    seed: int = 0
    frameskip: int = 1
    env_kwargs: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["policy"]["hidden"] = list(self.policy.hidden)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Workload":
        d = dict(d)
        pol = dict(d.pop("policy"))
        pol["hidden"] = tuple(pol["hidden"])
        pol["kwargs"] = tuple((k, v) for k, v in pol.get("kwargs", ()))
        return cls(policy=PolicySpec(**pol), **d)


def kv_label(d: dict) -> str:
    """`a=1,b=true`: how cell ids and reports print options and env arguments."""
    return ",".join(f"{k}={_label(v)}" for k, v in sorted((d or {}).items()))


def _label(v) -> str:
    return str(v).lower() if isinstance(v, bool) else f"{v:g}" if isinstance(v, float) else str(v)
