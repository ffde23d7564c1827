"""The "Adding an adapter" example of the docs (docs/adapters.md), exactly as written, works as an adapter."""
import re

from support import REPO, run_cli_subprocess
from support._dist import fake_distribution

PAGE = REPO / "docs" / "adapters.md"


def docs_example() -> str:
    text = PAGE.read_text()
    block = re.search(r"<!-- example-adapter:start -->\n```python\n(.*?)```\n<!-- example-adapter:end -->",
                      text, re.S)
    assert block, "docs/adapters.md lost its example-adapter block"
    return block.group(1)


def test_docs_adapter_example_runs(tmp_path):
    env = fake_distribution(tmp_path, "docs_example", {"threads": "threads_example"},
                            {"threads_example": docs_example()})
    out = tmp_path / "run"
    run = run_cli_subprocess(["run", "--adapter", "threads", "--env", "CartPole-v1", "--num-envs", "4",
                              "--opt", "workers=2", "--repeats", "2", "--duration", "0.1"], out=out, env=env, cwd=tmp_path)
    assert run.rc == 0, run.stderr
    got = run.rows
    assert [r["status"] for r in got] == ["ok", "ok"], got
    assert all(r["env_steps"] % 4 == 0 and r["env_steps"] > 0 and r["workers"] == 2 for r in got)
    assert (out / "index.html").exists() and (out / "summary.csv").exists()
