"""Every command block of the README runs as written (slow: the `-m slow` run) and, shrunk to
small sizes, in the default run; the Python block runs too."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from certdp.cli import main

from .conftest import SHARED_DATA

README = Path(__file__).resolve().parents[1] / "README.md"

#: shrinking rules for the default run: the same commands on small instances
SHRINK = [(r"grid:\d+x\d+", "grid:4x5"), (r"--outputs \d+", "--outputs 5"), (r"gaussian:\d+:", "gaussian:12:"),
          (r"(\.npy|\.bin):\d+", r"\1:12"), (r"--grid \d+x\d+", "--grid 6x6"), (r"--users \d+", "--users 2"),
          (r"--subsets \d+", "--subsets 3"), (r"--r \d+", "--r 3"), (r"--reps \d+", "--reps 2"),
          (r"--gap 1e-4", "--gap 1e-3"), (r"--vocabulary \d+", "--vocabulary 40")]


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(), flags=re.S)


def commands() -> list[tuple[str, str | None]]:
    """(certdp arguments, stdin) of every `bash run.sh certdp ...` line, continuation lines joined."""
    out = []
    for block in blocks("bash"):
        text = re.sub(r"\\\n\s*", " ", block)
        for line in text.splitlines():
            line = line.split("#")[0].strip() if " #" in line else line.strip()
            m = re.match(r"(?:printf '(.*?)' \| )?bash run\.sh certdp (.*)", line)
            if m:
                out.append((m.group(2).strip(), m.group(1).encode().decode("unicode_escape") if m.group(1) else None))
    return out


def shrink(args: str) -> str:
    for pat, rep in SHRINK:
        args = re.sub(pat, rep, args)
    return args


def run_all(tmp_path: Path, small: bool) -> None:
    run = tmp_path / "project"
    run.mkdir()
    (tmp_path / "shared").symlink_to(SHARED_DATA.parent)   # ../shared/data resolves as from the project
    cwd = os.getcwd()
    os.chdir(run)
    missing: set[str] = set()   # files the commands skipped for want of the shared data would have written
    try:
        for args, stdin in commands():
            a = shrink(args) if small else args
            words = shlex.split(a)
            if ("../shared/data" in a and not SHARED_DATA.exists()) or missing & set(words):
                missing.update(w for prev, w in zip(words, words[1:]) if prev == "--out")
                continue
            res = CliRunner().invoke(main, words, input=stdin)
            assert res.exit_code == 0, f"certdp {a}\n{res.output}"
            assert "Traceback" not in res.output
    finally:
        os.chdir(cwd)


def test_the_readme_lists_its_commands():
    cmds = [a for a, _ in commands()]
    assert len(cmds) >= 10 and any(a.startswith("solve") for a in cmds) and any(a.startswith("audit") for a in cmds)


def test_every_readme_command_runs_on_small_sizes(tmp_path):
    run_all(tmp_path, small=True)


@pytest.mark.slow
def test_every_readme_command_runs_as_written(tmp_path):
    run_all(tmp_path, small=False)


def test_the_readme_python_block_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for code in blocks("python"):
        exec(compile(shrink(code), "README.md", "exec"), {})
