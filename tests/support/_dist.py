"""A fake installed distribution on a temporary sys.path entry: the real entry-point path."""
import os


def fake_distribution(root, name: str, entry_points: dict, modules: dict, group: str = "rlbench.adapters") -> dict:
    """Write modules and `<name>-0.0.dist-info` declaring entry points of `group` (rlbench.adapters,
    rlbench.families, rlbench.jax_env_apis); return an env."""
    info = root / f"{name}-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0\n")
    lines = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{group}]\n{lines}\n")
    for mod, source in modules.items():
        (root / f"{mod}.py").write_text(source)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    return env
