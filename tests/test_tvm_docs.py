"""docs/tvm.md runs: every Python cell in order, from the repository's root, each printing exactly the output
block that follows it on the page; and its measurement table is the one examples/tvm/bench.py prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tvm_support import ROOT, require_tvm

DOC = ROOT / "docs" / "tvm.md"
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)


def cells() -> list[tuple[str, str | None]]:
    """Each Python cell of the page and the ``text`` block right after it (None when there is none)."""
    text = DOC.read_text(encoding="utf-8")
    blocks = [(m.group(1), m.group(2), m.start(), m.end()) for m in FENCE.finditer(text)]
    out: list[tuple[str, str | None]] = []
    for n, (lang, body, _, end) in enumerate(blocks):
        if lang != "python":
            continue
        nxt = blocks[n + 1] if n + 1 < len(blocks) else None
        follows = nxt is not None and nxt[0] == "text" and not text[end:nxt[2]].strip()
        out.append((body, nxt[1] if follows and nxt is not None else None))
    return out


def test_the_page_runs_and_prints_its_outputs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    require_tvm()
    page = cells()
    assert len(page) >= 10
    script = "\n".join(f"print('<<<cell {n}>>>', flush=True)\n{code}" for n, (code, _) in enumerate(page))
    path = tmp_path / "tvm_page.py"  # a file: TVMScript parses the functions from their source
    path.write_text(script, encoding="utf-8")
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run([sys.executable, str(path)], cwd=ROOT, capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = re.split(r"<<<cell (\d+)>>>\n", done.stdout)[1:]
    got = {int(printed[i]): printed[i + 1] for i in range(0, len(printed), 2)}
    for n, (_, want) in enumerate(page):
        if want is not None:
            assert got[n] == want, f"cell {n} of docs/tvm.md printed:\n{got[n]}\ninstead of:\n{want}"


def test_the_measurement_table_names_the_bench_command() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert "python examples/tvm/bench.py 64 128 256 1024" in text
    rows = re.findall(r"^\| (\d+) \| (True|False) \| ([\d,]+) \| ([\d,]+) \|", text, re.M)
    assert [r[0] for r in rows] == ["64", "128", "256", "1024"]
    assert all(r[1] == "True" and r[2] == r[3] for r in rows), "the lesson's cycles are the seed's"
