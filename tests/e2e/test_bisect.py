"""`rlbench bisect` over 8 commits of a clone of this project, one of which makes the synthetic env's step 2.5x
as costly: it names that commit after at most log2(8) + 2 = 5 runs, each added to the history, leaves no worktree
behind, and refuses ends that do not differ. And over 8 released versions of a package (hand-written wheels in a
local index) on which a user's env depends, the 6th of which makes it 2.5x as costly: it names that version.

Three repeats a run cannot reach p <= 0.05 in the U test, so the ends differ where their 95% CIs do not overlap:
with a 1.6x step (a 36% drop) CI saw one repeat of the good end on the loaded 2-core machine fall to the bad
end's range (4,749 vs 3,025 steps/s, refused as 'not significantly slower'); at 2.5x a repeat must lose 60%."""
import subprocess

import pytest
from support import REPO, run_cli
from support.wheels import write_wheel

from rlbench.results.history import History

pytestmark = pytest.mark.exclusive   # the slowdown must stand out of the noise

SUITE = """name = "bisect"
[protocol]
repeats = 3
warmup_s = 0.05
warmup_units = 2
duration_s = 0.2
min_units = 5
timeout_s = 60
[[sweep]]
adapters = ["serial"]
envs = ["rlbench/Synthetic-v0"]
num_envs = [1]
env_kwargs = { step_cost_us = 200 }
"""
SLOW_AT = 5
SLOWER = 2.5   # the slow commit's and release's step cost, times the others'


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def history_of_commits(tmp_path_factory):
    """A clone of this project with 8 more commits; the 6th slows the synthetic env's step."""
    repo = tmp_path_factory.mktemp("bisect") / "repo"
    subprocess.run(["git", "clone", "-q", str(REPO), str(repo)], check=True)
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    shas = [_git(repo, "rev-parse", "HEAD")]
    for k in range(8):
        if k == SLOW_AT:
            path = repo / "rlbench" / "synthetic.py"
            text = path.read_text()
            assert "        self.step_cost_us = float(step_cost_us)\n" in text
            path.write_text(text.replace("        self.step_cost_us = float(step_cost_us)\n",
                                         f"        self.step_cost_us = float(step_cost_us) * {SLOWER}\n", 1))
        else:
            (repo / "BISECT.txt").write_text(f"commit {k}\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"step {k}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    return repo, shas


@pytest.mark.slow
def test_bisect_names_the_commit_that_slowed_the_cell(tmp_path, capsys, history_of_commits):
    repo, shas = history_of_commits
    suite = tmp_path / "bisect.toml"
    suite.write_text(SUITE)
    db = tmp_path / "h.sqlite"
    run = run_cli(["bisect", str(suite), "serial/*", "--good", shas[0], "--bad", shas[-1], "--repo", str(repo),
                   "--db", str(db), "--out", str(tmp_path / "runs")])
    out = capsys.readouterr().out
    assert run.rc == 0, out
    assert f"first slow commit {shas[SLOW_AT + 1][:12]}" in out
    with History(str(db), create=False) as h:
        commits = [c for (c,) in h.db.execute("SELECT git_commit FROM runs")]
    assert 3 <= len(commits) <= 5 and set(commits) <= set(shas) and {shas[0], shas[-1]} <= set(commits)
    assert _git(repo, "worktree", "list").count("\n") == 0          # only the clone itself


@pytest.mark.slow
def test_ends_that_do_not_differ_are_refused(tmp_path, capsys, history_of_commits):
    repo, shas = history_of_commits
    suite = tmp_path / "bisect.toml"
    suite.write_text(SUITE)
    run = run_cli(["bisect", str(suite), "serial/*", "--good", shas[0], "--bad", shas[SLOW_AT], "--repo", str(repo),
                   "--db", str(tmp_path / "h.sqlite"), "--out", str(tmp_path / "runs")])
    assert run.rc == 2 and "is not significantly slower at the bad end" in capsys.readouterr().err
    assert run_cli(["bisect", str(suite), "serial/*", "--good", shas[-1], "--bad", shas[0], "--repo", str(repo),
                    "--db", str(tmp_path / "h.sqlite")]).rc == 2
    assert "is not an ancestor" in capsys.readouterr().err


USER_ENV = """from rlbench.synthetic import SyntheticEnv

def make(step_cost_us=200.0):
    try:
        from rlbench_toyslow import COST_FACTOR
    except ImportError:     # planning, in the main environment: the package is only in the versions' overlays
        COST_FACTOR = 1.0
    return SyntheticEnv(step_cost_us=step_cost_us * COST_FACTOR)
"""


@pytest.mark.slow
def test_bisect_names_the_release_that_slowed_the_cell(tmp_path, capsys, monkeypatch):
    versions = [f"1.{k}.0" for k in range(8)]
    for k, v in enumerate(versions):
        write_wheel(tmp_path / "wheels", "rlbench-toyslow", v,
                    {"rlbench_toyslow/__init__.py": f"COST_FACTOR = {SLOWER if k >= SLOW_AT else 1.0}\n"})
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    monkeypatch.setenv("RLBENCH_VENVS", str(tmp_path / "venvs"))
    monkeypatch.chdir(tmp_path)                       # the user's env module, imported from where rlbench runs
    (tmp_path / "slowenv.py").write_text(USER_ENV)
    suite = tmp_path / "bisect.toml"
    suite.write_text(SUITE.replace('"rlbench/Synthetic-v0"', '"slowenv:make"'))
    db = tmp_path / "h.sqlite"
    run = run_cli(["bisect", str(suite), "serial/*", "--package", "rlbench-toyslow", "--versions",
                   f"{versions[0]}..{versions[-1]}", "--db", str(db), "--out", str(tmp_path / "runs")])
    said = capsys.readouterr()
    out = said.out
    assert run.rc == 0, said.err
    assert f"first slow rlbench-toyslow {versions[SLOW_AT]} after" in out
    with History(str(db), create=False) as h:
        tags = [t for (t,) in h.db.execute("SELECT tag FROM runs")]
    assert 3 <= len(tags) <= 5 and {f"rlbench-toyslow=={versions[0]}", f"rlbench-toyslow=={versions[-1]}"} <= set(tags)
    assert run_cli(["bisect", str(suite), "serial/*", "--package", "rlbench-toyslow", "--versions", "1.0.0..1.9.0",
                    "--db", str(db), "--out", str(tmp_path / "more")]).rc == 2
    assert "1.9.0 is not a released version (valid: 1.0.0, 1.1.0" in capsys.readouterr().err
    assert not (tmp_path / "more").exists()
