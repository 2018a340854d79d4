"""File helpers shared by the modules that save results."""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np

_pending: dict[str, Path] = {}     # temporary file -> the file it will replace
_written: list[Path] = []          # files this process has written
_registry = threading.RLock()


@contextmanager
def atomic_target(path: str | Path, suffix: str) -> Iterator[str]:
    """Yield a temporary file name beside ``path``; on success it replaces ``path``, on any
    error it is removed, so a failed write never leaves a partial file behind. The write is
    registered while it lasts, so that a process stopped by a signal removes it too
    (:func:`abandon_writes`)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".tmp-", suffix=suffix)
    os.close(fd)
    with _registry:
        _pending[tmp] = p
    try:
        yield tmp
        with _registry:
            os.replace(tmp, p)
            _written.append(p)
    finally:
        with _registry:
            if os.path.exists(tmp):
                os.unlink(tmp)
            _pending.pop(tmp, None)


def abandon_writes(wait: float = 0.2) -> list[Path]:
    """For a process about to exit on a signal, from any thread: remove the temporary file of
    every write still under way and return the files already written. A write whose temporary
    file is gone has replaced its file (the replacement is atomic), so it counts as written.
    The registry is taken for at most ``wait`` seconds (the thread holding it may be stuck)
    and never given back, so no write completes afterwards."""
    _registry.acquire(timeout=wait)
    written = list(_written)
    for tmp, target in list(_pending.items()):
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            written.append(target)
        except OSError:
            pass
    return written


def write_json(path: str | Path, obj: Any) -> Path:
    """Write ``obj`` as JSON to ``path`` atomically (numbers numpy gives are written as floats)."""
    with atomic_target(path, ".json") as tmp:
        Path(tmp).write_text(json.dumps(obj, default=float))
    return Path(path)


MAX_JSON_DEPTH = 32
"""The deepest nesting of arrays and objects any JSON that certdp reads may have. Every file
format and message of certdp nests at most 4 levels; the limit leaves room and keeps the
parser's recursion far from Python's limit."""

_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def json_depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` in JSON ``text``, brackets inside strings ignored.
    Vectorised, so it runs before any parsing at the cost of one pass over the bytes."""
    bare = np.frombuffer(_JSON_STRING.sub('""', text).encode("utf-8", "surrogatepass"), dtype=np.uint8)
    step = np.isin(bare, (ord("["), ord("{"))).astype(np.int64) - np.isin(bare, (ord("]"), ord("}")))
    return int(np.cumsum(step).max(initial=0))


def load_json(text: str | bytes, what: str, max_depth: int = MAX_JSON_DEPTH, nonfinite: bool = False) -> Any:
    """Parse JSON ``text`` that came from outside certdp (a file, a request, an option).

    Raises ``ValueError`` naming ``what`` when the text is not JSON, when it nests deeper than
    ``max_depth`` (checked before parsing, so a hostile depth never reaches the recursive
    parser), or, unless ``nonfinite``, when it holds NaN or Infinity, which JSON does not have
    (certdp's own metadata writes an infinite eta as ``Infinity``, as Python's json does)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{what} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    depth = json_depth(text)
    if depth > max_depth:
        raise ValueError(f"{what} nests {depth} levels deep; at most {max_depth} are accepted")

    def _no_constant(name: str) -> Any:
        raise ValueError(f"{what} holds {name}, which is not a JSON number")

    try:
        return json.loads(text) if nonfinite else json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
