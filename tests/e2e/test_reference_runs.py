"""`make reference` (scripts/reference_runs.py): a set of reference runs is one commit's, survives being cut off
(a later call resumes), lands in reports/reference/MACHINE/ only whole, keeps the hand-written READMEs and says
which now describe an older run; bad input is one line and exit 2 with nothing written."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import reference_runs  # noqa: E402

TINY_SUITE = """name = "tiny"
[protocol]
repeats = 1
warmup_s = 0.05
warmup_units = 1
duration_s = 0.2
min_units = 3
timeout_s = 60
[[sweep]]
adapters = ["serial"]
envs = ["CartPole-v1"]
num_envs = [1, 2]
"""


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A checkout with one tiny suite, committed; the script's ROOT and suite list point at it."""
    root = tmp_path / "repo"
    (root / "suites").mkdir(parents=True)
    (root / "suites" / "tiny.toml").write_text(TINY_SUITE)
    for cmd in (["init", "-q"], ["add", "."],
                ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "tiny"]):
        subprocess.run(["git", *cmd], cwd=root, check=True)
    monkeypatch.setattr(reference_runs, "ROOT", str(root))
    monkeypatch.setattr(reference_runs, "SUITES", {"tiny": []})
    monkeypatch.setattr(reference_runs, "DEFAULT", ["tiny"])
    return root


def call(capsys, *argv):
    rc = reference_runs.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_bad_input_is_one_line_exit_2_and_writes_nothing(repo, tmp_path, capsys):
    staging = str(tmp_path / "staging")
    rc, _, err = call(capsys, "--machine", "box", "--suites", "tiny nope", "--staging", staging)
    assert rc == 2 and err.strip() == "reference: unknown suite 'nope' (valid: tiny)"
    rc, _, err = call(capsys, "--machine", "../box", "--staging", staging)
    assert rc == 2 and err.strip().startswith("reference: --machine '../box' is not a plain folder name")
    (repo / "suites" / "tiny.toml").write_text(TINY_SUITE + "# edited\n")
    rc, _, err = call(capsys, "--machine", "box", "--staging", staging)
    assert rc == 2 and err.strip().startswith("reference: the working tree has changes to tracked files "
                                              "(suites/tiny.toml)")
    assert len(err.strip().splitlines()) == 1
    subprocess.run(["rm", "-rf", str(repo / ".git")], check=True)
    rc, _, err = call(capsys, "--machine", "box", "--staging", staging)
    assert rc == 2 and err.strip() == f"reference: {repo} is not a git checkout: a reference set records the commit it ran"
    assert not (tmp_path / "staging").exists() and not (repo / "reports").exists()


def test_a_second_set_at_the_same_commit_is_refused_while_the_first_runs(repo, tmp_path, capsys):
    from filelock import FileLock
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    (tmp_path / "staging").mkdir()
    with FileLock(str(tmp_path / "staging" / commit[:10]) + ".lock"):
        rc, _, err = call(capsys, "--machine", "box", "--staging", str(tmp_path / "staging"))
    assert rc == 2 and err.strip().startswith(f"reference: another `make reference` at {commit[:10]} holds")
    assert not (repo / "reports").exists()


def test_a_set_lands_whole_resumes_where_cut_and_keeps_the_readmes(repo, tmp_path, capsys):
    staging = tmp_path / "staging"
    rc, out, err = call(capsys, "--machine", "box", "--staging", str(staging))
    assert rc == 0, err
    dest = repo / "reports" / "reference" / "box"
    rows = [json.loads(line) for line in (dest / "tiny" / "results.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["ok", "ok"]
    env = json.loads((dest / "tiny" / "env.json").read_text())
    table = (dest / "README.md").read_text()
    assert table.startswith("# Reference runs: box\n")
    assert f"| tiny | {env['git']['commit'][:10]}" in table and "| 2 x 1 |" in table and "| 2 ok |" in table
    assert not any(staging.rglob("*.jsonl")), "the staging folder is emptied once the set has landed"

    # a set cut off inside the suite: its staging folder holds the plan and one of the two rows
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    cut = staging / commit[:10] / "tiny"
    cut.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-r", str(dest / "tiny"), str(cut)], check=True)
    (cut / "results.jsonl").write_text((dest / "tiny" / "results.jsonl").read_text().splitlines()[0] + "\n")
    (dest / "tiny" / "README.md").write_text("# tiny, by hand\n")
    rc, out, err = call(capsys, "--machine", "box", "--staging", str(staging))
    assert rc == 0, err
    lines = (dest / "tiny" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0]) == rows[0], "the kept row stays, only the missing one ran"
    assert (dest / "tiny" / "README.md").read_text() == "# tiny, by hand\n"
    assert "reports/reference/box/tiny/README.md" in out   # listed: it describes the previous run


def test_a_hand_written_machine_readme_is_never_overwritten(tmp_path):
    from reference_index import write_index
    run = tmp_path / "m" / "r"
    run.mkdir(parents=True)
    (run / "env.json").write_text(json.dumps({"git": {"commit": "abc", "dirty": True}, "cells": 3,
                                              "settings": {"repeats": 2}, "started_at": "2026-01-01T00:00:00",
                                              "ended_at": "2026-01-01T00:01:05", "cpu_model": "X"}))
    (run / "results.jsonl").write_text('{"status": "ok"}\n{"status": "error"}\n{"stat')   # a torn last line
    (tmp_path / "m" / "README.md").write_text("# Notes by hand\n")
    path = write_index(str(tmp_path / "m"), "Reference runs: m", "Made here.")
    assert path.endswith("RUNS.md") and (tmp_path / "m" / "README.md").read_text() == "# Notes by hand\n"
    assert "| r | abc (dirty) | 2026-01-01T00:00:00 | 1 min 5 s | 3 x 2 | X |" in Path(path).read_text()
    assert "| 1 error, 1 ok |" in Path(path).read_text()
