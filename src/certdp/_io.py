"""The one writer and the one reader of files and text from outside.

Writing. Every result certdp writes (a mechanism, a JSON report, a view, a plot) goes through
:func:`atomic_target`, under a name chosen by :func:`output_path`:

- :func:`output_path` is the rule for a path given by the user, checked before any work: a
  name that is empty or ``-``, ends with a path separator or names an existing folder is
  refused (a result is a file; give its name), as is an existing special file (``/dev/null``, a FIFO, a
  device: nothing is written *through* a special file, and no ``/dev/null.npz`` beside it);
  the suffix is added when the name does not end with it; every part of the name must fit
  the file system (255 bytes), and a file must be creatable in the nearest existing folder
  (probed by creating and removing an empty temporary file, which catches permissions, for
  root too, and read-only file systems).
- :func:`atomic_target` writes to a temporary file beside the target and renames it over the
  target only when the write is complete, so a failed or interrupted write never leaves a
  partial file. Every ``OSError`` on the way (disk full, file too large, permission, read-only
  file system, a name too long, a folder in the way) becomes one :class:`OutputError` naming
  the path and the reason.

Reading. :func:`input_file` and :func:`read_bytes` open a file the user names (a missing
file, a folder, a FIFO, a name too long or an unreadable file is one ``ValueError`` naming
it); :func:`load_json` is the one parser of JSON that comes from outside certdp: its nesting
depth is checked before parsing.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import secrets
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np

NAME_MAX = 255
"""The longest name (in bytes) of one part of a path that certdp writes: the limit of every
common file system."""


class OutputError(ValueError):
    """A result cannot be written where it was asked: one line naming the path and the reason."""


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "no space left on the device (disk full)"
    if exc.errno == errno.EFBIG:
        return "the file is larger than this process may write (file size limit)"
    if exc.errno == errno.EROFS:
        return "the file system is read-only"
    if exc.errno == errno.ENAMETOOLONG:
        return f"a name is too long (at most {NAME_MAX} bytes per part)"
    return (exc.strerror or type(exc).__name__).rstrip(".")


def _refuse_non_file(q: Path, what: str) -> None:
    if q.is_dir():
        raise OutputError(f"{what}: {q} is a folder; give a file name")
    if q.exists() and not q.is_file():
        raise OutputError(f"{what}: {q} is a special file (a device, FIFO or socket), not a file to write")


def output_path(path: str | Path, suffix: str = "", *, what: str = "--out") -> Path:
    """The file a result given as ``path`` is written to (``suffix`` added when the name does
    not end with it), checked before any work; :class:`OutputError` naming ``what`` otherwise
    (see the module docstring for the rule)."""
    raw = os.fspath(path)
    if not isinstance(raw, str):
        raw = os.fsdecode(raw)
    if not raw.strip():
        raise OutputError(f"{what}: empty path; give a file name")
    if raw == "-":
        raise OutputError(f"{what}: '-' (standard output) cannot take this result; give a file name")
    if "\x00" in raw:
        raise OutputError(f"{what}: a path cannot contain a NUL byte")
    given = Path(raw)
    if raw.endswith(("/", os.sep)) or given.name in ("", ".", ".."):
        raise OutputError(f"{what}: {raw} names a folder; give a file name")
    p = given if not suffix or given.name.endswith(suffix) else given.with_name(given.name + suffix)
    long = [part for part in p.parts if len(os.fsencode(part)) > NAME_MAX]
    if long:
        raise OutputError(f"{what}: the name {long[0][:40]}... is {len(os.fsencode(long[0]))} bytes long"
                          + (f" with its suffix {suffix}" if p is not given and long[0] == p.name else "")
                          + f"; a part of a path may have at most {NAME_MAX} bytes")
    try:
        _refuse_non_file(given, what)
        _refuse_non_file(p, what)
        parent = p.parent
        while not parent.exists():
            parent = parent.parent
    except OSError as exc:
        raise OutputError(f"{what}: {p} cannot be written: {_reason(exc)}") from None
    if not parent.is_dir():
        raise OutputError(f"{what}: {parent} is not a folder, so {p} cannot be written")
    if p.exists() and not os.access(p, os.W_OK):
        raise OutputError(f"{what}: {p} cannot be written (permission denied)")
    try:
        probe = _create_registered(parent / p.name, "")
    except OSError as exc:
        raise OutputError(f"{what}: {p} cannot be written: {_reason(exc)} in {parent}") from None
    _drop(probe)
    return p


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_pending: dict[str, Path] = {}     # temporary file -> the file it will replace
_created: set[str] = set()         # the temporary files of _pending that have been created
_written: list[Path] = []          # files this process has written
_registry = threading.RLock()


@contextmanager
def atomic_target(path: str | Path, suffix: str) -> Iterator[str]:
    """Yield a temporary file name beside ``path``; on success it replaces ``path``, on any
    error it is removed, so a failed write never leaves a partial file behind. An ``OSError``
    (raised here or by the caller's write) becomes an :class:`OutputError` naming ``path``.
    The write is registered while it lasts, so that a process stopped by a signal removes it
    too (:func:`abandon_writes`)."""
    p = Path(path)
    tmp: str | None = None
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = _create_registered(p, suffix)
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())      # the permissions of a file created normally
        with _registry:
            os.replace(tmp, p)
            _written.append(p)
    except OSError as exc:
        raise OutputError(f"cannot write {p}: {_reason(exc)}") from None
    finally:
        if tmp is not None:
            _drop(tmp)


def _drop(tmp: str) -> None:
    """Remove a registered temporary file if it is still there (a write that failed, or a probe)
    and forget it; in an order that a stop at any step neither leaves it behind nor counts its
    target as written."""
    with _registry:
        if os.path.lexists(tmp):
            _created.discard(tmp)
            os.unlink(tmp)
        _pending.pop(tmp, None)
        _created.discard(tmp)


def _create_registered(target: Path, suffix: str) -> str:
    """A new empty temporary file beside ``target``, registered before it exists (a stop between
    its creation and its registration would leave it behind: :func:`abandon_writes` removes
    every registered name, and counts a missing one as written only once it was created)."""
    for _ in range(100):
        tmp = str(target.parent / f".tmp-{secrets.token_hex(8)}{suffix}")
        with _registry:
            _pending[tmp] = target
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            with _registry:
                _pending.pop(tmp, None)
            continue
        except BaseException:
            with _registry:
                _pending.pop(tmp, None)
            raise
        with _registry:
            _created.add(tmp)
        os.close(fd)
        return tmp
    raise OSError(errno.EEXIST, f"no free temporary name beside {target}")


def abandon_writes(wait: float = 0.2) -> list[Path]:
    """For a process about to exit on a signal, from any thread: remove the temporary file of
    every write still under way and return the files already written. A write whose temporary
    file was created and is gone has replaced its file (the replacement is atomic), so it counts
    as written.
    The registry is taken for at most ``wait`` seconds (the thread holding it may be stuck)
    and never given back, so no write completes afterwards."""
    _registry.acquire(timeout=wait)
    written = list(_written)
    for tmp, target in list(_pending.items()):
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            if tmp in _created:
                written.append(target)
        except OSError:
            pass
    return written


def write_json(path: str | Path, obj: Any) -> Path:
    """Write ``obj`` as JSON to ``path`` atomically (numbers numpy gives are written as floats)."""
    text = json.dumps(obj, default=float)
    with atomic_target(path, ".json") as tmp:
        Path(tmp).write_text(text)
    return Path(path)


def write_npz(path: str | Path, arrays: dict[str, np.ndarray]) -> Path:
    """Write named arrays as a compressed ``.npz`` to ``path`` atomically (no pickle)."""
    with atomic_target(path, ".npz") as tmp:
        np.savez_compressed(tmp, **arrays)  # type: ignore[arg-type]
    return Path(path)


def input_file(path: str | Path, what: str) -> Path:
    """``path`` as a file to read, named ``what`` in errors: ValueError when it is missing, is
    not a regular file (a folder, a FIFO that would block, a device) or cannot be looked up
    (a name too long, a folder that cannot be searched), instead of an ``OSError``."""
    p = Path(path)
    try:
        if p.is_file():
            return p
        exists = p.exists()
    except (OSError, ValueError) as exc:
        reason = _reason(exc) if isinstance(exc, OSError) else "a path cannot contain a NUL byte"
        raise ValueError(f"{what} {str(p)[:80]}: {reason}") from None
    if not exists:
        raise ValueError(f"{what} not found: {p}")
    raise ValueError(f"{what} {p} is not a regular file (a folder, FIFO or device)")


def read_bytes(path: str | Path, what: str) -> bytes:
    """The bytes of the file ``path`` (:func:`input_file`), a read error as one ValueError."""
    p = input_file(path, what)
    try:
        return p.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read {what} {p}: {_reason(exc)}") from None


MAX_JSON_DEPTH = 32
"""The deepest nesting of arrays and objects any JSON that certdp reads may have. Every file
format and message of certdp nests at most 4 levels; the limit leaves room and keeps the
parser's recursion far from Python's limit."""

#: Bytes of JSON text :func:`json_depth` scans at a time (its work arrays are 8 bytes per byte).
DEPTH_CHUNK = 1 << 22


_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')


def json_depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` in JSON ``text``, brackets inside strings ignored.
    One vectorised pass over the bytes, in chunks (so it runs before any parsing, in time and
    memory linear in the text): a quote opens or closes a string unless an odd run of
    backslashes precedes it."""
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" not in data:
        # no escapes: the brackets and quotes alone decide, and bytes.translate drops the rest in C
        data = data.translate(None, _NOT_STRUCTURE)
    depth = best = 0
    inside = False      # the chunks before ended inside a string
    odd = False         # ... with an odd run of backslashes
    for start in range(0, len(data), DEPTH_CHUNK):
        a = np.frombuffer(data, dtype=np.uint8, count=min(DEPTH_CHUNK, len(data) - start), offset=start)
        idx = np.arange(a.size, dtype=np.int64)
        slash = a == ord("\\")
        last_other = np.maximum.accumulate(np.where(slash, -1, idx))
        parity = (idx - last_other) % 2 == 1           # an odd run of backslashes ends here
        parity[last_other < 0] ^= odd                  # a run that began in the chunk before
        escaped = np.r_[odd, parity[:-1]]
        quotes = np.cumsum((a == ord('"')) & ~escaped) + int(inside)
        outside = quotes % 2 == 0
        step = (np.isin(a, (ord("["), ord("{"))).astype(np.int64) - np.isin(a, (ord("]"), ord("}")))) * outside
        level = depth + np.cumsum(step)
        best = max(best, int(level.max(initial=depth)))
        depth, inside, odd = int(level[-1]), bool(quotes[-1] % 2), bool(parity[-1])
    return best


_FLOAT_MAX = int(sys.float_info.max)
_DIGITS_AS_ZERO = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_LONG_EXPONENT = re.compile(rb"[eE][+-]?[0-9]{3}")


def _may_leave_float64(text: str) -> bool:
    """Whether a number literal in ``text`` could lie beyond float64's range: one with at most
    199 digits in a row and an exponent of at most 2 digits is below 10^298. (Strings count
    too: text that holds such a run anywhere is read number by number.)"""
    data = text.encode("utf-8", "surrogatepass")
    return b"0" * 200 in data.translate(_DIGITS_AS_ZERO) or _LONG_EXPONENT.search(data) is not None


class _Refused(ValueError):
    """A JSON text refused by :func:`load_json`'s own hooks (its message names the text)."""


def load_json(text: str | bytes, what: str, max_depth: int = MAX_JSON_DEPTH, nonfinite: bool = False) -> Any:
    """Parse JSON ``text`` that came from outside certdp (a file, a request, an option).

    Raises ``ValueError`` naming ``what`` when the text is not JSON, when it nests deeper than
    ``max_depth`` (checked before parsing, so a hostile depth never reaches the recursive
    parser), when an object holds one key twice, or, unless ``nonfinite``, when it holds NaN,
    Infinity (which JSON does not have) or a number past float64's range
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
        raise _Refused(f"{what} holds {name}, which is not a JSON number")

    def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        # json keeps the last of two equal keys: a file could show one value to a reader that
        # takes the first and another to certdp
        out = dict(pairs)
        if len(out) != len(pairs):
            seen: set[str] = set()
            for k, _ in pairs:
                if k in seen:
                    raise _Refused(f"{what} holds the key {k!r} twice in one object")
                seen.add(k)
        return out

    def _finite(literal: str) -> float:
        v = float(literal)
        if not math.isfinite(v):
            raise _Refused(f"{what} holds the number {literal[:40]}, beyond float64's range")
        return v

    def _finite_int(literal: str) -> int:
        v = int(literal)
        if abs(v) > _FLOAT_MAX:
            raise _Refused(f"{what} holds the number {literal[:40]}..., beyond float64's range")
        return v

    try:
        if nonfinite:
            return json.loads(text, object_pairs_hook=_unique_keys)
        # json's own number readers where no literal can leave float64: a Python call per number
        # costs 5 times the parse
        plain = not _may_leave_float64(text)
        return json.loads(text, parse_constant=_no_constant, parse_float=None if plain else _finite,
                          parse_int=None if plain else _finite_int, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except _Refused:
        raise
    except ValueError as exc:                     # Python's own limits: an integer of 4,301 digits
        raise ValueError(f"{what} holds a number Python cannot read ({str(exc)[:120]})") from None
