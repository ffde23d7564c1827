"""The documentation: the site (mkdocs.yml, docs/) builds under --strict (every page in the nav, no broken link
or anchor), and README.md stays a short front page whose relative links all lead somewhere."""
import os
import re
import subprocess
import sys

from markdown.extensions.toc import slugify
from support import REPO

README = REPO / "README.md"
README_MAX_BYTES = 12 * 1024
SHARED = b"../" + b"shared/"   # spelled apart, so that this file does not cite it
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def test_site_builds_strict(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(REPO / "mkdocs.yml"),
                          "--site-dir", str(tmp_path / "site")], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "WARNING" not in run.stderr, run.stderr
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "metrics" / "index.html").exists()


def test_readme_is_short():
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes (at most {README_MAX_BYTES}): move detail into docs/"


def _anchors(page) -> set:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slugify(h.strip().replace("`", ""), "-") for h in re.findall(r"^#+ (.+)$", text, re.M)}


def test_readme_links_lead_somewhere():
    links = [t for t in LINK.findall(README.read_text()) if not re.match(r"[a-z]+:", t)]
    assert links, "README.md links into the docs"
    for target in links:
        path, _, anchor = target.partition("#")
        if not path:
            continue  # an anchor of the README itself: GitHub's slugs, not checked here
        assert (REPO / path).exists(), f"README.md links to {path}, which does not exist"
        if anchor and path.endswith(".md"):
            assert anchor in _anchors(REPO / path), f"README.md links to {target}: {path} has no such heading"


def test_nothing_cites_a_file_outside_the_repository():
    """A user's clone has only the repository: the published figures live in docs/published.md, and no tracked
    file points at the workspace's shared folder (where the project's source articles once lay)."""
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True).stdout
    outside = [name for name in files.decode().split("\0") if name and (REPO / name).is_file()
               and SHARED in (REPO / name).read_bytes()]
    assert not outside, f"files citing {SHARED.decode()}: {outside}"


def test_every_run_folder_the_docs_name_exists():
    """A figure in the docs names the committed run it comes from; that folder must be in the repository."""
    named = set()
    for page in [README, *sorted((REPO / "docs").rglob("*.md"))]:
        named |= set(re.findall(r"reports/reference/[A-Za-z0-9_./*-]+", page.read_text()))
    assert named, "the docs cite committed runs"
    placeholders = ("reports/reference/NAME", "reports/reference/KIND/PART")     # how-to text, not a citation
    missing = [p for p in sorted(named) if p.rstrip("/") not in placeholders and not list(REPO.glob(p.rstrip("/.")))]
    assert not missing, f"run folders named in the docs but not committed: {missing}"
