"""What is measured: the env, how many copies, which policy picks the actions, and the accounting."""
import math
import re
from dataclasses import asdict, dataclass, field

from rlbench import registry
from rlbench.errors import UsageError

POLICY_FIELDS = {"hidden": tuple, "threads": int, "device": str, "cost_us": float}
POLICY_FORMS = {"hidden": "layer sizes >= 1 like 64x64", "threads": "an integer >= 1",
                "device": "cpu, cuda or cuda:N", "cost_us": "a finite number >= 0"}


@dataclass(frozen=True)
class PolicySpec:
    """`random`, `mlp` (torch; hidden sizes, threads, device) or `fixed_cost` (burns cost_us per batch)."""
    name: str = "random"
    hidden: tuple = (64, 64)
    threads: int = 1
    device: str = "cpu"
    cost_us: float = 0.0

    @property
    def label(self) -> str:
        if self.name == "mlp":
            return f"mlp{'x'.join(map(str, self.hidden))}-{self.device}-t{self.threads}"
        if self.name == "fixed_cost":
            return f"fixed_cost{self.cost_us:g}us"
        return self.name

    @property
    def device_label(self) -> str:
        return self.device if self.name == "mlp" else "cpu"


def parse_policy(raw) -> PolicySpec:
    """Accepts `name`, `name:key=value,key=value` (hidden as 64x64) or a TOML table."""
    if isinstance(raw, PolicySpec):
        return raw
    if isinstance(raw, str):
        name, _, rest = raw.partition(":")
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
    for key, value in fields.items():
        if key not in POLICY_FIELDS:
            raise UsageError(f"unknown policy field '{key}' (valid: {', '.join(POLICY_FIELDS)})")
        kwargs[key] = _policy_field(key, value)
    return PolicySpec(name=name, **kwargs)


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
        return cls(policy=PolicySpec(**pol), **d)


def kv_label(d: dict) -> str:
    """`a=1,b=true`: how cell ids and reports print options and env arguments."""
    return ",".join(f"{k}={_label(v)}" for k, v in sorted((d or {}).items()))


def _label(v) -> str:
    return str(v).lower() if isinstance(v, bool) else f"{v:g}" if isinstance(v, float) else str(v)
