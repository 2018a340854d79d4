"""Static checks of certdp's layout (docs/architecture.md): no import cycle between modules
(function-level imports included), no import from a room into a room above it (:data:`ROOMS`),
no function longer than a limit, and no lab-diary phrase in code or docs.

Usage, from the project root (the test suite runs it: tests/test_layout.py)::

    python tools/layout_check.py . [--max-lines 120]

It prints each finding and exits 1 if there is any.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: The rooms of the package from the ground up (docs/architecture.md): a module may import from
#: its own room and from the rooms below it. A room is a module or a package, named without the
#: package's own name; the package's ``__init__`` (the public facade) may import anything.
ROOMS: tuple[tuple[str, ...], ...] = (
    ("_validate", "_io", "_optional", "_interrupt", "randomness", "progress"),
    ("space",),
    ("datasets",),
    ("graph",),
    ("lp",),
    ("measures",),
    ("audit",),
    ("certify",),
    ("mechanism",),
    ("pmo",),
    ("family", "lrgeo", "views"),
    ("solve",),
    ("experiments", "plots", "locations", "text"),
    ("cli",),
)

DIARY = re.compile(r"\b(session \d+|sessions? \d+|as up to session|kept for comparison)\b", re.I)


@dataclass
class Report:
    modules: int = 0
    cycles: list[list[str]] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)


def _modules(src: Path) -> dict[str, Path]:
    out = {}
    for pkg in (p for p in src.iterdir() if (p / "__init__.py").exists()):
        for f in pkg.rglob("*.py"):
            parts = list(f.relative_to(src).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = f
    return out


def _imports(m: str, f: Path, modules: dict[str, Path]) -> tuple[set[str], ast.Module]:
    """The modules of the project ``m`` imports (anywhere in it), and its syntax tree."""
    tree = ast.parse(f.read_text(), str(f))
    is_pkg = f.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = m.split(".") if is_pkg else m.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # 'from pkg import sub' imports pkg.sub (and pkg's __init__ only when no sub is a module)
            subs = [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in modules]
            targets = subs if subs and len(subs) == len(node.names) else [mod] + subs
        else:
            continue
        for t in targets:
            while t and t not in modules:
                t = t.rpartition(".")[0]
            # importing a package's own __init__ from inside it is not a cycle worth flagging
            if t and t != m and not m.startswith(t + "."):
                found.add(t)
    return found, tree


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _room(module: str, rooms: tuple[tuple[str, ...], ...]) -> int | None:
    """The floor of ``module``'s room (None for the package's own __init__ or a module in no room)."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    for floor, names in enumerate(rooms):
        if parts[1] in names:
            return floor
    return None


def check(root: Path, max_lines: int = 120, rooms: tuple[tuple[str, ...], ...] = ROOMS) -> Report:
    """Every finding of the layout checks on the project at ``root`` (its ``src/`` packages,
    README.md and docs/)."""
    src = root / "src"
    modules = _modules(src)
    rep = Report(modules=len(modules))
    graph: dict[str, set[str]] = {}
    for m, f in sorted(modules.items()):
        graph[m], tree = _imports(m, f, modules)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > max_lines:
                    rep.findings.append(f"long function: {f.relative_to(root)}:{node.lineno} {node.name} "
                                        f"({n} lines > {max_lines})")
        here = _room(m, rooms)
        if here is None and "." in m:
            rep.findings.append(f"module in no room: {m} (add its room to ROOMS in tools/layout_check.py)")
            continue
        for t in sorted(graph[m]):
            there = _room(t, rooms)
            if here is not None and there is not None and there > here:
                rep.findings.append(f"upward import: {m} imports {t}")
    rep.cycles = _cycles(graph)
    rep.findings += ["import cycle: " + " <-> ".join(c) for c in rep.cycles]
    texts = list(src.rglob("*.py")) + [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    for f in texts:
        if not f.exists() or "egg-info" in str(f):
            continue
        for ln, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            if DIARY.search(line):
                rep.findings.append(f"diary text: {f.relative_to(root)}:{ln}: {line.strip()[:90]}")
    return rep


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(".")
    max_lines = int(argv[argv.index("--max-lines") + 1]) if "--max-lines" in argv else 120
    rep = check(root, max_lines)
    for x in rep.findings:
        print(x)
    print(f"{rep.modules} modules, {len(rep.cycles)} import cycles, {len(rep.findings)} findings")
    return 1 if rep.findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
