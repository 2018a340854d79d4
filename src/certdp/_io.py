"""File helpers shared by the modules that save results."""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


@contextmanager
def atomic_target(path: str | Path, suffix: str) -> Iterator[str]:
    """Yield a temporary file name beside ``path``; on success it replaces ``path``, on any
    error it is removed, so a failed write never leaves a partial file behind."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".tmp-", suffix=suffix)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, p)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_json(path: str | Path, obj: Any) -> Path:
    """Write ``obj`` as JSON to ``path`` atomically (numbers numpy gives are written as floats)."""
    with atomic_target(path, ".json") as tmp:
        Path(tmp).write_text(json.dumps(obj, default=float))
    return Path(path)
