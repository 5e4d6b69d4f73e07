"""The product refers only to what a user has: no tracker issue numbers, no design brief outside the repo.

Every text file in the repository (code, docs, generated reports, scripts) is searched; a hit names the
file and line, so the reference can be replaced by what it stood for (the target, the reason, the doc).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACKER_RE = re.compile(r"\bissues?\s*#?\d+\b", re.IGNORECASE)
TEXT_SUFFIXES = {".py", ".md", ".sh", ".s", ".sv", ".v", ".vh", ".svh", ".c", ".h", ".yaml", ".yml", ".json", ".toml",
                 ".txt", ".cfg", ".ini", ""}


def _repo_files() -> list[Path]:
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        names = [n for n in listed.decode().split("\0") if n]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: walk the tree
        names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
                 if p.is_file() and not {".git", ".venv", "__pycache__"} & set(p.relative_to(ROOT).parts)]
    return [ROOT / n for n in names if Path(n).suffix in TEXT_SUFFIXES and (ROOT / n).is_file()]


def test_no_file_refers_to_a_tracker_issue() -> None:
    hits = []
    for path in _repo_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if TRACKER_RE.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not hits, "tracker references (say what they stood for instead):\n" + "\n".join(hits)


def test_the_pattern_finds_tracker_references() -> None:
    word = "issue"  # spelled apart so that this file passes its own search
    assert TRACKER_RE.search(f"targets ({word} 4): ...") and TRACKER_RE.search(f"see {word.title()} #12")
    assert not TRACKER_RE.search("4 issues in 12 files") and not TRACKER_RE.search("reissue 3 loads")


def test_no_file_cites_a_design_brief_the_repo_does_not_have() -> None:
    """The architecture is written down in docs/architecture.md; nothing points elsewhere for it."""
    name = "DESIGN" + ".md"  # spelled apart so that this file passes its own search
    hits = [f"{path.relative_to(ROOT)}:{number}"
            for path in _repo_files() if path.suffix != ".json"
            for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
            if name in line]
    assert not hits, f"references to {name} (point to docs/architecture.md instead): {hits}"
