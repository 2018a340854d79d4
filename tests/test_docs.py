"""The documentation as a reader meets it: every public function says what it does, every
example in a docstring runs, and the API reference builds from the docstrings."""

from __future__ import annotations

import ast
import doctest
import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "certdp"


def modules() -> list[str]:
    names = []
    for f in sorted(SRC.rglob("*.py")):
        parts = list(f.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(parts))
    return names


def undocumented(path: Path) -> list[str]:
    """Public functions, classes and methods of ``path`` (names without a leading underscore,
    in public classes) that have no docstring."""
    out: list[str] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not ch.name.startswith("_"):
                if ast.get_docstring(ch) is None:
                    out.append(f"{path.relative_to(ROOT)}:{ch.lineno} {prefix}{ch.name}")
                if isinstance(ch, ast.ClassDef):
                    walk(ch, f"{prefix}{ch.name}.")

    walk(ast.parse(path.read_text(encoding="utf-8")), "")
    return out


def test_every_public_function_class_and_method_has_a_docstring():
    missing = [m for f in sorted(SRC.rglob("*.py")) for m in undocumented(f)]
    assert not missing, "no docstring:\n" + "\n".join(missing)


def _examples() -> list[str]:
    found = []
    for name in modules():
        text = (SRC.parent / Path(*name.split("."))).with_suffix(".py")
        if not text.exists():
            text = SRC.parent / Path(*name.split(".")) / "__init__.py"
        if ">>>" in text.read_text(encoding="utf-8"):
            found.append(name)
    assert found, "no docstring examples found"
    return found


@pytest.mark.parametrize("module", _examples())
def test_docstring_examples_run(module):
    mod = importlib.import_module(module)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(mod, module) if t.examples]
    assert tests, f"{module} has '>>>' in its source but doctest finds no example"
    for t in tests:
        runner.run(t)
    res = runner.summarize(verbose=False)
    assert res.failed == 0, f"{res.failed} of {res.attempted} docstring examples of {module} failed (output above)"


def test_the_api_reference_builds_from_the_docstrings(tmp_path):
    """``mkdocs build --strict``: a docstring that documents a parameter the signature does not
    have, or a page that links to nothing, fails the build."""
    assert shutil.which("mkdocs") or importlib.util.find_spec("mkdocs"), "mkdocs comes with certdp[docs]"
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    page = (tmp_path / "site" / "api" / "locations" / "index.html").read_text(encoding="utf-8")
    assert "LocationObfuscator" in page and "max_snap_km" in page


def test_the_package_says_it_is_typed():
    assert (SRC / "py.typed").is_file()
    assert 'certdp = ["py.typed"]' in (ROOT / "pyproject.toml").read_text()
