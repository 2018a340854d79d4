"""Helpers shared by the benchmark scripts: print a table and write it under results/."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Sequence

RESULTS = Path(__file__).resolve().parent / "results"
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def write_table(name: str, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                notes: Sequence[str] = (), raw: Any = None) -> Path:
    """Print a markdown table and write it (plus raw JSON) to results/NAME.md / .json."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    lines = [f"# {title}", "",
             f"Command: `python benchmarks/{Path(sys.argv[0]).name} {' '.join(sys.argv[1:])}`".rstrip(),
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
    path = RESULTS / f"{name}.md"
    path.write_text(text)
    if raw is not None:
        (RESULTS / f"{name}.json").write_text(json.dumps(raw, indent=1, default=str))
    return path
