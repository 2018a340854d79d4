"""Helpers shared by the benchmark scripts: print a table and write it next to the script.

Every script is run as a module from the project root (``python -m benchmarks.paper000.decompositions``,
or ``bash run.sh bench paper000.decompositions``). Results go to the script's own ``results/``
folder, or to ``--out DIR``. A file that is already there (a committed result) is never
replaced by surprise: the new one is written beside it with the run's time in its name, unless
``--force`` says to replace it.

Each table's header says what produced it: the title, the ``Command:`` that reruns it (a module
under ``benchmarks/``), the ``Commit:`` of the code that ran, the ``Variant:`` when the script's
arguments choose one (``--variant`` or ``--variants``), and the machine and time of the run.
``python -m benchmarks.index`` lists every table from these lines in ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

_RUN = time.strftime("%Y%m%d-%H%M%S")


class Steps:
    """The progress line of a benchmark on stderr (the command's own line, :class:`certdp.cli.common.Live`):
    builds done out of ``total`` with an estimate of the time left, and the last step of the build
    that runs (HiGHS iterations and objective, rounds and certified gap). Use it as a context
    manager; pass it as ``progress=`` to :func:`certdp.solve` and call :meth:`done` after each build.
    """

    def __init__(self, what: str, total: int) -> None:
        from certdp.cli.common import Live

        self.live = Live(what)
        self.total = total
        self.count = 0

    def __enter__(self) -> "Steps":
        self.live.__enter__()
        self.done("starting", advance=False)
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(*exc)

    def __call__(self, event: Any) -> None:
        self.live(event)

    def done(self, message: str, *, advance: bool = True) -> None:
        """One more build is done (``message`` says which, with its result)."""
        from certdp.progress import ProgressEvent

        self.count += int(advance)
        self.live(ProgressEvent("build", message, {"done": self.count, "total": self.total}))
_WRITTEN: set[Path] = set()


def machine() -> str:
    """The machine's architecture and cores, and the cores this process may use when fewer (a run
    pinned with ``taskset`` prices on fewer threads by default), and the Python version."""
    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    pinned = f" ({usable} usable)" if usable and cores and usable < cores else ""
    return f"{platform.machine()}, {cores} cores{pinned}, Python {platform.python_version()}"


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def output_args(ap: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``--out DIR`` and ``--force`` to a benchmark's arguments."""
    ap.add_argument("--out", default=None, help="folder for the results (default: results/ beside the script)")
    ap.add_argument("--force", action="store_true", help="replace result files that already exist")
    return ap


def _script() -> Path:
    main = sys.modules.get("__main__")
    return Path(getattr(main, "__file__", sys.argv[0])).resolve()


def results_dir(args: argparse.Namespace | None = None) -> Path:
    out = getattr(args, "out", None)
    d = Path(out) if out else _script().parent / "results"
    d.mkdir(parents=True, exist_ok=True)
    return d


def target(name: str, suffix: str, args: argparse.Namespace | None = None) -> Path:
    """Where result ``name`` + ``suffix`` goes: beside an existing file of that name (with the
    run's time in the name) unless ``--force``."""
    d = results_dir(args)
    p = d / f"{name}{suffix}"
    if p.exists() and p not in _WRITTEN and not getattr(args, "force", False):
        p = d / f"{name}-{_RUN}{suffix}"
    _WRITTEN.add(p)   # a table saved again later in the same run replaces its own file
    return p


def end_with_parent() -> None:
    """Make the calling process (a benchmark's child, one solve) exit when the benchmark process
    that started it is gone, killed or not: otherwise an interrupted benchmark leaves its solves
    running for up to their cap. A daemon thread notices the parent's end as a change of parent
    process (the child is handed to init), once a second."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(3)

    threading.Thread(target=watch, name="end-with-parent", daemon=True).start()


def _git_commit() -> str:
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude,glob)benchmarks/*/results/**"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head + (" with uncommitted changes" if dirty else "")


_COMMIT = _git_commit()


def commit() -> str:
    """The commit the run's code was at when it started, marked when files tracked by git
    differed from it."""
    return _COMMIT


def command() -> str:
    """The command line that reruns this run, its arguments quoted for a POSIX shell so that one
    holding spaces (``--design 'cap 16 + subset'``) reads back as the same argument."""
    script = _script()
    root = Path(__file__).resolve().parents[1]
    try:
        mod = ".".join(script.relative_to(root).with_suffix("").parts)
        return f"python -m {mod} {shlex.join(sys.argv[1:])}".rstrip()
    except ValueError:
        return f"python {shlex.quote(script.name)} {shlex.join(sys.argv[1:])}".rstrip()


def variant(args: argparse.Namespace | None) -> str | None:
    """The variant the run's arguments choose (``--variant``, or every one of ``--variants``), or
    None when the script has no such argument."""
    for key in ("variant", "variants"):
        value = getattr(args, key, None)
        if value is not None:
            return ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    return None


def write_table(name: str, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                notes: Sequence[str] = (), raw: Any = None, args: argparse.Namespace | None = None) -> Path:
    """Print a markdown table and write it (plus the raw results as JSON, with the command, the
    commit and the variant) as NAME.md / NAME.json (see the module docstring for where)."""
    chosen = variant(args)
    lines = [f"# {title}", "", f"Command: `{command()}`", f"Commit: {commit()}",
             *([f"Variant: {chosen}"] if chosen is not None else []),
             f"Machine: {machine()}; run {time.strftime('%Y-%m-%d %H:%M:%S')}", ""]
    lines.append("| " + " | ".join(columns) + " |")
    lines.append("|" + "|".join("---" for _ in columns) + "|")
    for r in rows:
        lines.append("| " + " | ".join(fmt(v) for v in r) + " |")
    if notes:
        lines.append("")
        lines.extend(n if (not n or n.startswith("|")) else f"- {n}" for n in notes)  # rows, blanks verbatim
    text = "\n".join(lines) + "\n"
    print(text)
    path = target(name, ".md", args)
    path.write_text(text)
    if raw is not None:
        record = {"command": command(), "commit": commit(), **({"variant": chosen} if chosen is not None else {}),
                  "results": raw}
        target(name, ".json", args).write_text(json.dumps(record, indent=1, default=str))
    return path
