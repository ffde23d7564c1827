"""The benchmark history: one SQLite file (the standard library's sqlite3: one file a CI job can cache or commit,
safe for concurrent writers, and no server or extra package; DuckDB's columnar speed would buy nothing for a few
hundred thousand rows) holding every repeat of every run added to it, keyed by the machine class (the part of
the fingerprint that makes two runs comparable, rlbench.results.compare.machine), suite, cell, commit, package
versions, run and time. `add` is idempotent: a run is known by its host, id and start, and adding it again
changes nothing unless the run grew (a resumed run), when its repeats are replaced. The schema is versioned
(PRAGMA user_version); a file of another version is refused, never rewritten."""
import hashlib
import json
import os
import sqlite3
import subprocess
from dataclasses import dataclass

from rlbench.errors import UsageError
from rlbench.results.compare import METRIC, machine
from rlbench.results.model import Run
from rlbench.results.record import RunRecord
from rlbench.results.store import RESULTS, read_rows

SCHEMA = 1
ENV = "env.json"
DEFAULT_DB = os.path.join("reports", "history.sqlite")

TABLES = """
CREATE TABLE IF NOT EXISTS runs (
    run_key TEXT PRIMARY KEY,      -- sha256 of hostname, run_id and started_at: the same run, wherever it lies
    digest TEXT NOT NULL,          -- sha256 of its results.jsonl: a resumed run grows, its digest changes
    run_id TEXT, suite TEXT, command TEXT, hostname TEXT,
    machine_class TEXT NOT NULL,   -- sha256 prefix of `machine` below
    machine TEXT NOT NULL,         -- JSON: cpu_model, cpu_logical_cores, ram_gb, gpus
    machine_label TEXT NOT NULL,
    git_commit TEXT, git_dirty INTEGER, commit_time TEXT,
    rlbench_version TEXT, packages TEXT, adapter_envs TEXT,
    started_at TEXT, ended_at TEXT, source TEXT, tag TEXT, added_at TEXT
);
CREATE TABLE IF NOT EXISTS repeats (
    run_key TEXT NOT NULL REFERENCES runs(run_key) ON DELETE CASCADE,
    suite TEXT, cell_id TEXT NOT NULL, repeat INTEGER NOT NULL, profiled INTEGER NOT NULL,
    status TEXT NOT NULL, adapter TEXT, env TEXT, num_envs INTEGER,
    steps_per_s REAL, started_at TEXT,
    row TEXT NOT NULL,             -- the results.jsonl row as written: every other figure, by json_extract
    PRIMARY KEY (run_key, cell_id, repeat, profiled)
);
CREATE INDEX IF NOT EXISTS repeats_by_cell ON repeats(suite, cell_id);
CREATE INDEX IF NOT EXISTS runs_by_machine ON runs(machine_class, suite);
"""


@dataclass(frozen=True)
class Added:
    """What `add` did with one run folder: 'new', 'updated' (it grew), 'unchanged' or 'skipped' (why)."""
    path: str
    outcome: str
    repeats: int = 0
    why: str = ""


def machine_key(record: RunRecord) -> tuple:
    """(machine class, its JSON, a label) of a run's record: runs of one class are comparable."""
    fp = machine(record)
    text = json.dumps(fp, sort_keys=True)
    gpus = ", ".join(fp["gpus"]) if fp["gpus"] else "no GPU"
    label = f"{fp['cpu_model']} x{fp['cpu_logical_cores']}, {fp['ram_gb']} GB, {gpus}"
    return hashlib.sha256(text.encode()).hexdigest()[:12], text, label


def run_key(doc: dict) -> str:
    """A run's key, from its env.json: the same run wherever its folder lies or was copied."""
    return hashlib.sha256("|".join(str(doc.get(k)) for k in ("hostname", "run_id", "started_at"))
                          .encode()).hexdigest()[:20]


def run_folders(paths) -> list:
    """Every run folder (a results.jsonl; `add` skips one without its env.json beside it) at or under these
    paths, in path order; a path that is neither a folder nor holds a run is refused."""
    found = []
    for path in paths:
        if not os.path.isdir(path):
            raise UsageError(f"history add: {path!r} is not a folder (valid: a run folder, or one that holds runs)")
        here = []
        for root, dirs, files in os.walk(path):
            dirs.sort()
            if RESULTS in files:
                here.append(root)
        if not here:
            raise UsageError(f"history add: no run under {path!r} (valid: folders holding {RESULTS})")
        found += here
    return found


def _commit_time(commit: str) -> str:
    """The commit's date where this checkout has it (the series' order over commits), else None."""
    if not commit:
        return None
    from rlbench import ROOT
    try:
        out = subprocess.run(["git", "-C", ROOT, "show", "-s", "--format=%cI", commit], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


class History:
    """The history file, opened (created at SCHEMA when missing); `with History(path) as h:`."""

    def __init__(self, path: str = DEFAULT_DB, create: bool = True):
        if not create and not os.path.exists(path):
            raise UsageError(f"no history at {path!r} (valid: an existing file; `rlbench history add RUN_DIR` "
                             "makes one)")
        if path != ":memory:":   # a scratch history (history check reads a new run through one) has no folder
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.path = path
        self.db = sqlite3.connect(path, timeout=60)
        self.db.execute("PRAGMA foreign_keys = ON")
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        tables = self.db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
        if version == 0 and tables == 0:
            with self.db:
                self.db.executescript(TABLES)
                self.db.execute(f"PRAGMA user_version = {SCHEMA}")
        elif version != SCHEMA:
            self.db.close()
            raise UsageError(f"history {path!r} has schema {version} (valid: {SCHEMA}, this rlbench's)")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.db.close()

    def add(self, run_dir: str, tag: str = None) -> Added:
        """One run folder into the history, in one transaction: new, updated (it grew), or unchanged."""
        results = os.path.join(run_dir, RESULTS)
        with open(results, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        rows = read_rows(results)
        try:
            with open(os.path.join(run_dir, ENV)) as f:
                doc = json.load(f)
        except FileNotFoundError:
            return Added(run_dir, "skipped", why=f"no {ENV} beside its rows: the machine it ran on is unknown")
        except (OSError, ValueError) as exc:
            return Added(run_dir, "skipped", why=f"unreadable {ENV}: {exc}")
        if not rows:
            return Added(run_dir, "skipped", why=f"no row in {RESULTS}")
        record = RunRecord.from_json(doc)
        key = run_key(doc)
        known = self.db.execute("SELECT digest, tag FROM runs WHERE run_key = ?", (key,)).fetchone()
        if known and known[0] == digest and (tag is None or known[1] == tag):
            return Added(run_dir, "unchanged", len(rows))
        cls, fp, label = machine_key(record)
        git = doc.get("git") or {}
        suite = rows[0].get("suite")
        with self.db:
            self.db.execute("DELETE FROM runs WHERE run_key = ?", (key,))
            self.db.execute(
                "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,datetime('now'))",
                (key, digest, doc.get("run_id"), suite, doc.get("command", "run"), doc.get("hostname"), cls, fp,
                 label, git.get("commit"), int(bool(git.get("dirty"))), _commit_time(git.get("commit")),
                 doc.get("rlbench_version"), json.dumps(doc.get("packages") or {}, sort_keys=True),
                 json.dumps(doc.get("adapter_envs") or {}, sort_keys=True), doc.get("started_at"),
                 doc.get("ended_at"), os.path.abspath(run_dir), tag if tag is not None else (known or [None, None])[1]))
            self.db.executemany(
                "INSERT OR REPLACE INTO repeats VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                [(key, r.get("suite", suite), r.cell_id, int(r.repeat), int(r.profiled), r.status, r.adapter, r.env,
                  r.num_envs, _number(r.get(METRIC)), r.started_at, json.dumps(r.to_row(), default=str))
                 for r in map(Run.from_row, rows)])
        return Added(run_dir, "updated" if known else "new", len(rows))

    def suites(self) -> list:
        return [s for (s,) in self.db.execute("SELECT DISTINCT suite FROM runs ORDER BY suite")]

    def machines(self) -> dict:
        """machine class -> its label, for every class the history holds."""
        return dict(self.db.execute("SELECT DISTINCT machine_class, machine_label FROM runs ORDER BY 1"))

    def failed_cells(self) -> tuple:
        """The cells none of whose repeats is ok (every one an error, timeout or lost row)."""
        rows = self.db.execute("SELECT cell_id, max(status = 'ok') FROM repeats GROUP BY cell_id").fetchall()
        return tuple(cell for cell, ok in rows if not ok)

    def repeats(self, suite: str = None, machine_class: str = None, metric: str = METRIC):
        """A pandas DataFrame, one row per ok repeat (profiled ones left out), with its run's commit, machine
        and times: what the series are made of. `metric`: a column of the rows (json_extract when it is not
        steps_per_s)."""
        import pandas as pd
        value = "p.steps_per_s" if metric == METRIC else "json_extract(p.row, ?)"
        params = [] if metric == METRIC else [f"$.{metric}"]
        where, args = ["p.status = 'ok'", "p.profiled = 0"], []
        if suite is not None:
            where.append("r.suite = ?")
            args.append(suite)
        if machine_class is not None:
            where.append("r.machine_class = ?")
            args.append(machine_class)
        sql = (f"SELECT r.run_key, r.run_id, r.suite, r.machine_class, r.machine_label, r.git_commit, r.git_dirty, "
               f"r.commit_time, r.started_at AS run_started_at, r.tag, r.packages, p.cell_id, p.repeat, "
               f"{value} AS value FROM repeats p JOIN runs r USING (run_key) WHERE {' AND '.join(where)}")
        frame = pd.read_sql_query(sql, self.db, params=params + args)
        return frame[frame["value"].notna()]


def _number(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
