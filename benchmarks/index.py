"""The index of the results tables: ``benchmarks/README.md``, generated from the tables' own headers.

Every table written by :func:`benchmarks._common.write_table` starts with its title, the
``Command:`` that reruns it, the ``Commit:`` of the code that ran (marked when files differed
from it), an optional ``Variant:`` and the ``Machine: ...; run DATE TIME`` line. This module reads
those lines from every ``benchmarks/*/results/*.md`` and writes one row per table, so the index
names exactly the results in the tree. Regenerate it after adding or merging results::

    python -m benchmarks.index              # writes benchmarks/README.md
    python -m benchmarks.index --check      # exit 1 when benchmarks/README.md is not current
    python -m benchmarks.index --from-git   # give each table whose run did not record its code
                                            # the commits git knows for it, then write the index

Where the code of a table comes from (its *provenance*): ``run`` when the run recorded its commit
(the ``Commit:`` line write_table writes, or one a table's own notes and JSON recorded); ``git``
when the run did not, and all that is known is what git says about the file: the commit that
added it and the last one that changed it (:data:`FROM_GIT`). The code that ran is then not
known: the run came before the last change, so its code was that commit's or an earlier one's,
possibly with changes no commit holds.

The test suite (tests/test_results.py) checks that the index is current, that every table has a
provenance that agrees with git, and that every table's command is one its script accepts.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INDEX = ROOT / "benchmarks" / "README.md"

_MODULE = re.compile(r"python -m (benchmarks(?:\.\w+)+)")
_RUN = re.compile(r"; run (\d{4}-\d{2}-\d{2})")
_SHA = re.compile(r"[0-9a-f]{7,40}")
#: the ``Commit:`` line of a table whose run did not record its code: what git knows of the file
FROM_GIT = "not recorded by the run; the table was added in {added} and last changed in {last} (git)"
_FROM_GIT = re.compile(FROM_GIT.replace("(", r"\(").replace(")", r"\)")
                       .format(added=r"(?P<added>[0-9a-f]{7,40})", last=r"(?P<last>[0-9a-f]{7,40})"))


@dataclass(frozen=True)
class Result:
    """What a results table's header says about it."""

    path: Path          # the table, relative to the project root
    title: str
    command: str        # the ``Command:`` line's command, "" when the table has none
    commit: str         # the run's commit ("run"), the file's last change ("git"), "" when unknown
    dirty: bool         # files tracked by git differed from the commit when the run started
    variant: str        # "" when the table does not say
    date: str           # YYYY-MM-DD of the run, "" when not recorded
    provenance: str = ""  # "run": the run recorded its commit; "git": only git's history of the file
    added: str = ""     # "git": the commit that added the file

    @property
    def module(self) -> str | None:
        """The module the command runs (``benchmarks.paper000.scale``), None for a command that
        is not ``python -m benchmarks...``."""
        m = _MODULE.search(self.command)
        return m.group(1) if m else None

    def script(self, root: Path = ROOT) -> Path | None:
        """The script file the command runs, None when the command names no module of
        ``benchmarks/`` or that module's file does not exist."""
        if self.module is None:
            return None
        f = root.joinpath(*self.module.split(".")).with_suffix(".py")
        return f if f.is_file() else None


def _field(lines: list[str], name: str) -> str:
    return next((ln[len(name) + 1:].strip() for ln in lines if ln.startswith(name + ":")), "")


def _provenance(commit: str) -> tuple[str, str, bool, str]:
    """(provenance, commit, dirty, added) from a ``Commit:`` line's text: a hash first (with
    ``+``, ``+dirty`` or "with uncommitted changes" when files differed) is the run's own record;
    :data:`FROM_GIT` is git's."""
    git = _FROM_GIT.match(commit)
    if git:
        return "git", git["last"], False, git["added"]
    first = commit.split()[0] if commit else ""
    sha = first.split("+")[0]
    if not _SHA.fullmatch(sha):
        return "", "", False, ""
    return "run", sha, "+" in first or "uncommitted" in commit, ""


def read(path: Path, root: Path = ROOT) -> Result:
    """The header of the results table at ``path``."""
    lines = path.read_text(encoding="utf-8").splitlines()[:12]
    title = next((ln[2:].strip() for ln in lines if ln.startswith("# ")), "")
    provenance, commit, dirty, added = _provenance(_field(lines, "Commit"))
    run = _RUN.search(_field(lines, "Machine"))
    return Result(path=path.relative_to(root), title=title, command=_field(lines, "Command").strip("`").strip(),
                  commit=commit, dirty=dirty, variant=_field(lines, "Variant"), date=run.group(1) if run else "",
                  provenance=provenance, added=added)


def history(path: Path, root: Path = ROOT) -> list[str]:
    """The commits that changed the file at ``path`` (renames followed), newest first; empty when
    git does not know the file or is not there."""
    try:
        out = subprocess.run(["git", "log", "--format=%H", "--follow", "--", str(path)], cwd=root,
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return out.split()


def from_git(path: Path, root: Path = ROOT) -> str | None:
    """Give the table at ``path``, whose run did not record its code, the ``Commit:`` line of
    :data:`FROM_GIT`; the line written, or None when the table has a provenance already or git
    cannot tell (a file not committed, or changed since its last commit)."""
    if read(path, root).provenance:
        return None
    changed = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", str(path)], cwd=root, check=False).returncode
    commits = history(path.relative_to(root), root)
    if changed or not commits:
        return None
    line = "Commit: " + FROM_GIT.format(added=commits[-1][:12], last=commits[0][:12])
    lines = path.read_text(encoding="utf-8").split("\n")
    at = next((i + 1 for i, ln in enumerate(lines[:12]) if ln.startswith("Command:")), 1)
    path.write_text("\n".join(lines[:at] + [line] + lines[at:]), encoding="utf-8")
    return line


def results(root: Path = ROOT) -> list[Result]:
    """Every results table under ``benchmarks/*/results/``, in path order."""
    return [read(p, root) for p in sorted((root / "benchmarks").glob("*/results/*.md"))]


def _cell(text: str) -> str:
    return text.replace("|", "\\|") if text else "-"


def render(found: list[Result], root: Path = ROOT) -> str:
    """The index's markdown: one section per benchmark folder, one row per table."""
    out = ["# Benchmark results", "",
           "Generated by `python -m benchmarks.index` from the header of every table in",
           "`benchmarks/*/results/`; do not edit by hand. Each row names the script that produced the",
           "table with its arguments, the variant it ran, where its commit comes from (*provenance*), the",
           "commit and the day of the run; \"-\": the table does not say.", "",
           "- provenance *run*: the run recorded the commit its code was at (\"yes\" under *dirty*: files",
           "  tracked by git differed from that commit).",
           "- provenance *git*: the run did not record its code; the commit is the last one that changed the",
           "  table's file, and the table's `Commit:` line names the one that added it. The code that",
           "  ran is not known beyond that: the run came before that last change, so its code was that",
           "  commit's or an earlier one's, possibly with changes no commit holds.", ""]
    folders = sorted({r.path.parts[1] for r in found})
    for folder in folders:
        out += [f"## {folder}", "",
                "| table | title | script and arguments | variant | provenance | commit | dirty | run |",
                "|---|---|---|---|---|---|---|---|"]
        for r in (r for r in found if r.path.parts[1] == folder):
            script = r.script(root)
            args = _MODULE.sub("", r.command).strip()
            name = (f"`{script.relative_to(root / 'benchmarks').as_posix()}{' ' + args if args else ''}`" if script
                    else f"missing: `{r.command or '-'}`")
            out.append(f"| [{r.path.name}]({r.path.relative_to('benchmarks').as_posix()}) | {_cell(r.title)} "
                       f"| {_cell(name)} | {_cell(r.variant)} | {_cell(r.provenance)} | {_cell(r.commit)} "
                       f"| {'yes' if r.dirty else ('no' if r.provenance == 'run' else '-')} | {_cell(r.date)} |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the index is not current; write nothing")
    ap.add_argument("--from-git", action="store_true",
                    help="first give each table whose run did not record its code what git knows of it")
    a = ap.parse_args(argv)
    if a.from_git:
        for r in results():
            line = from_git(ROOT / r.path)
            if line:
                print(f"{r.path}: {line}")
            elif not r.provenance:
                print(f"{r.path}: no provenance, and git cannot give one (not committed, or changed since)",
                      file=sys.stderr)
    text = render(results())
    if a.check:
        current = INDEX.read_text(encoding="utf-8") if INDEX.exists() else ""
        if current != text:
            print(f"{INDEX.relative_to(ROOT)} is not current: run python -m benchmarks.index", file=sys.stderr)
            return 1
        return 0
    INDEX.write_text(text, encoding="utf-8")
    print(f"wrote {INDEX.relative_to(ROOT)} ({len(results())} tables)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
