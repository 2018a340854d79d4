"""The layout check (tools/layout_check.py) passes on the repository, and finds what it looks for
on generated packages: import cycles, upward imports between rooms, long functions, diary text."""

from __future__ import annotations

import importlib.util
import re
import sys
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("layout_check", ROOT / "tools" / "layout_check.py")
assert _spec is not None and _spec.loader is not None
layout_check = sys.modules["layout_check"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(layout_check)


def test_the_repository_has_no_cycle_no_upward_import_no_long_function():
    rep = layout_check.check(ROOT)
    assert rep.modules > 50
    assert rep.findings == []


ROOMS = (("a0", "a1"), ("b0", "b1"), ("c0", "c1"))
NAMES = ["a0", "a1", "b0", "b1", "c0"]   # c1 imports nothing: the target of the planted upward import


@st.composite
def packages(draw):
    """A package ``pkg`` of one module per name of ROOMS, importing downwards or sideways
    (never a cycle: each only from the names before it), plus the defects to plant."""
    imports = {n: sorted(draw(st.sets(st.sampled_from(NAMES[:i])) if i else st.just(set())))
               for i, n in enumerate(NAMES)}
    cycle = draw(st.booleans())
    upward = draw(st.booleans())
    long_fn = draw(st.booleans())
    diary = draw(st.booleans())
    return imports, cycle, upward, long_fn, diary


def _write(root: Path, imports: dict[str, list[str]], cycle: bool, upward: bool, long_fn: bool,
           diary: bool) -> None:
    pkg = root / "src" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    body = {n: [f"from .{m} import x as _{m}" for m in ms] for n, ms in imports.items()}
    if cycle:      # the lowest module imports the highest, which imports it: a cycle of two
        body["a0"].append("from .c0 import x as _c0")
        body["c0"].append("from .a0 import x as _a0")
    body["c1"] = []
    if upward:     # sideways in its room is allowed, upwards is not: a1 -> c1 (inside a function)
        body["a1"].append("def f():\n    from .c1 import x\n    return x")
    if long_fn:
        body["b1"].append("def g():\n" + "    y = 1\n" * 12 + "    return y")
    for n, lines in body.items():
        (pkg / f"{n}.py").write_text("\n".join(lines + ["x = 1", ""]))
    (root / "README.md").write_text("A package.\n" + ("Measured in session 12.\n" if diary else ""))


@settings(max_examples=40)
@given(packages())
def test_the_check_finds_exactly_the_planted_defects(case):
    imports, cycle, upward, long_fn, diary = case
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _write(root, imports, cycle, upward, long_fn, diary)
        rep = layout_check.check(root, max_lines=10, rooms=ROOMS)
    kinds = sorted({f.split(":")[0] for f in rep.findings})
    expected = sorted(({"import cycle", "upward import"} if cycle else set())
                      | ({"upward import"} if upward else set())
                      | ({"long function"} if long_fn else set())
                      | ({"diary text"} if diary else set()))
    assert kinds == expected
    assert (len(rep.cycles) == 1) == cycle
    if upward:
        assert "upward import: pkg.a1 imports pkg.c1" in rep.findings


def test_a_module_in_no_room_is_named():
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _write(root, {n: [] for n in NAMES}, False, False, False, False)
        (root / "src" / "pkg" / "stray.py").write_text("x = 1\n")
        rep = layout_check.check(root, rooms=ROOMS)
    assert rep.findings == ["module in no room: pkg.stray (add its room to ROOMS in tools/layout_check.py)"]


# ------------------------------------------------------------------ references to docs/
DOC_REF = re.compile(r"\bdocs/([A-Za-z0-9_.-]+\.md)(?:#([A-Za-z0-9_-]+))?")

#: references the outputs decomposition's modules make to pages that are not in docs/ (their
#: docstrings are rewritten with its configuration): each must go, and this set with it
PENDING = {("src/certdp/pmo/outputs/master.py", "history.md"), ("src/certdp/pmo/outputs/pricing.py", "history.md")}


def anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_reference_to_docs_names_a_page_and_a_heading_that_exist():
    """``docs/<page>.md`` and ``docs/<page>.md#<anchor>`` in the code, tests, benchmarks and docs
    resolve: the page exists and has a heading with that anchor (code links its decisions so)."""
    headings = {p.name: {anchor(line.lstrip("#")) for line in p.read_text().splitlines() if line.startswith("#")}
                for p in (ROOT / "docs").glob("*.md")}
    files = [*ROOT.glob("src/**/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("benchmarks/**/*.py"),
             *ROOT.glob("docs/*.md"), ROOT / "README.md", *ROOT.glob("tools/*.py")]
    broken = set()
    for f in files:
        for page, tag in DOC_REF.findall(f.read_text()):
            if page not in headings or (tag and tag not in headings[page]):
                broken.add((str(f.relative_to(ROOT)), page + (f"#{tag}" if tag else "")))
    assert broken == PENDING


# ------------------------------------------------------------------ the one way to a Mechanism
#: direct constructions outside mechanism.py (every engine goes through Mechanism.certified)
DIRECT: set[str] = set()


def test_only_mechanism_py_constructs_a_mechanism():
    """Every engine turns its matrix into a Mechanism through Mechanism.certified (which
    certifies it and stores the geometry, costs and metadata); a direct ``Mechanism(...)`` call
    anywhere else in src/ is found by its syntax tree."""
    import ast

    found = set()
    for f in (ROOT / "src").rglob("*.py"):
        if f.name == "mechanism.py":
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Mechanism":
                found.add(str(f.relative_to(ROOT)))
    assert found == DIRECT
