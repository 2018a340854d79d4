"""The view file: JSON with a digest, written atomically, read back under strict checks.

A view file is what a publisher hands out: the public domains, the noisy outputs and the
budget they cost, and nothing else about the records (not even a digest of the table: a hash
of private data lets anyone who can guess the data confirm the guess). Whoever holds the file
alone can query it (:func:`certdp.views.view.load_view`).

**The digest.** ``digest`` is ``sha256:`` and the SHA-256 of the file's content without that
field, serialised canonically (keys sorted, no spaces, floats in Python's shortest round-trip
form). It detects an accidental or naive edit: a changed count, epsilon, spend or ledger, a
truncated copy. It does not authenticate: nothing secret goes into it, so whoever edits a file
on purpose can recompute it. A reader who must know who published a file needs a signature
over it, which certdp does not make.

**The checks on reading** (:class:`ViewFileError`, one line naming the file and the field):
the format tag; the digest; every field's JSON type and shape (integers where codes are, not
floats that would be truncated, not strings that numpy would parse); finite numbers; epsilon
> 0 and 0 <= spent <= epsilon; the noise model the method writes, its scales at least
sensitivity/epsilon (:func:`certdp.views.noise.noise_from_dict`); the leaves inside the
domain, non-empty and a partition of it (:func:`check_partition`); synthetic records inside the domain, once each; marginals over
valid, distinct axes with the right number of cells. A file that passes answers exactly what
its numbers say.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .._io import atomic_target, load_json
from .._validate import BLOCK

FORMAT = "certdp-view/3"

MAX_MAGNITUDE = 1e15
"""The largest absolute value a view file's numbers (noisy counts, marginals, noise scales,
strategy factors) may hold: far above any count plus its noise at the smallest epsilon a view
is built with (scales of 1e10, tails of 40 scales), and far enough below float64's range that
sums over millions of leaves and squared scales stay finite."""

_MISSING = object()


class ViewFileError(ValueError):
    """A view file that cannot be read as one: its message names the file and what is wrong."""


def canonical_json(obj: Any) -> bytes:
    """``obj`` as canonical JSON bytes: keys sorted, no whitespace, ASCII, no NaN or Infinity."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode("ascii")


def content_digest(obj: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of ``obj`` without its ``digest`` key, serialised canonically."""
    body = {k: v for k, v in obj.items() if k != "digest"}
    return "sha256:" + hashlib.sha256(canonical_json(body)).hexdigest()


def write_view_file(payload: dict[str, Any], path: str | Path) -> Path:
    """Write ``payload`` (with ``format`` and ``digest`` set here) atomically: a temporary file
    beside ``path``, flushed to disk, then renamed over it, so a failed write leaves nothing."""
    body = {**payload, "format": FORMAT}
    body["digest"] = content_digest(body)
    text = canonical_json(body)
    p = Path(path)
    with atomic_target(p, ".json") as tmp:
        with open(tmp, "wb") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    return p


def read_view_file(path: str | Path) -> tuple[dict[str, Any], str]:
    """The content of the view file at ``path`` and the name to use in errors, after the format
    and digest checks (the fields are checked by the view that reads them)."""
    p = Path(path)
    where = f"view file {p}"
    if not p.is_file():
        raise ViewFileError(f"view not found: {p}")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ViewFileError(f"cannot read the {where}: {exc.strerror or exc}") from None
    d = load_json(raw, where)
    if not isinstance(d, dict) or not isinstance(d.get("format"), str) or not d["format"].startswith("certdp-view/"):
        raise ViewFileError(f"{p} is not a {FORMAT} file")
    if d["format"] != FORMAT:
        raise ViewFileError(f"{where} is in format {d['format']!r}, which this certdp does not read (it reads "
                            f"{FORMAT}); rebuild the view")
    if d.get("digest") != content_digest(d):
        raise ViewFileError(f"{where}: the content does not match its digest (the file was changed after it was "
                            "written, or truncated)")
    return d, where


# ----------------------------------------------------------------------- typed fields
class Fields:
    """Typed access to the fields of one parsed file, each error naming the file and field."""

    def __init__(self, d: Mapping[str, Any], where: str) -> None:
        self.d = d
        self.where = where

    def fail(self, what: str) -> ViewFileError:
        """The error for ``what``, naming the file."""
        return ViewFileError(f"{self.where}: {what}")

    def get(self, key: str) -> Any:
        """The field ``key``; an error if it is missing."""
        if key not in self.d:
            raise self.fail(f"the field '{key}' is missing")
        return self.d[key]

    def only(self, allowed: set[str]) -> None:
        """Refuse fields outside ``allowed``."""
        extra = sorted(set(self.d) - allowed)
        if extra:
            raise self.fail(f"unknown fields {extra}")

    def text(self, key: str) -> str:
        """The field ``key`` as a non-empty string."""
        v = self.get(key)
        if not isinstance(v, str) or not v:
            raise self.fail(f"'{key}' must be a non-empty string, got {v!r}"[:300])
        return v

    def number(self, key: str, value: Any = _MISSING) -> float:
        """The field ``key`` (or ``value``) as a finite number of magnitude at most MAX_MAGNITUDE."""
        v = self.get(key) if value is _MISSING else value
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not abs(v) <= MAX_MAGNITUDE:
            raise self.fail(f"'{key}' must be a finite number of magnitude at most {MAX_MAGNITUDE:g}, got {v!r}"[:300])
        return float(v)

    def mapping(self, key: str) -> dict[str, Any]:
        """The field ``key`` as a JSON object."""
        v = self.get(key)
        if not isinstance(v, dict):
            raise self.fail(f"'{key}' must be an object, got {type(v).__name__}")
        return v

    def array(self, key: str, value: Any, kind: str, ndim: int) -> np.ndarray:
        """``value`` as an array of ``ndim`` dimensions: ``kind`` 'i' takes JSON integers only,
        'f' finite numbers (integers included)."""
        try:
            a = np.array(value)
        except (ValueError, TypeError, OverflowError):
            raise self.fail(f"'{key}' must be a rectangular array of numbers") from None
        if a.size == 0:
            a = a.reshape((0,) * ndim)
        elif a.ndim != ndim or a.dtype.kind not in ("i" if kind == "i" else "iuf"):
            want = "integers" if kind == "i" else "numbers"
            raise self.fail(f"'{key}' must be a {ndim}-dimensional array of {want}, got "
                            f"{a.ndim} dimensions of {a.dtype.kind!r} values")
        if kind == "i":
            return a.astype(np.int64)
        a = a.astype(np.float64)
        if not np.all(np.abs(a) <= MAX_MAGNITUDE):
            raise self.fail(f"'{key}' holds a number that is not finite or above {MAX_MAGNITUDE:g} in magnitude")
        return a


#: The partition check's work (a leaf is visited once per region above it) is bounded by
#: ``CUT_WORK`` visits a leaf plus ``CUT_ALLOWANCE``: certdp's own trees peel one leaf per cut
#: where the records are concentrated (20,000 equal records over 300 columns: RIPOST's 11,614
#: leaves, about 6.7e7 visits), and a crafted spiral of 64,000 bars took 110 s (2e9 visits).
CUT_WORK = 200
CUT_ALLOWANCE = 2 * 10**8


def check_partition(lo: np.ndarray, hi: np.ndarray, shape: tuple[int, ...], fail) -> None:
    """Check that the boxes ``[lo, hi)`` (``L x d``) partition the grid ``shape``: each box
    non-empty and inside, no two overlapping, none missing. ``fail(msg)`` makes the error.

    The views' leaves come from recursive cuts, so the check follows cuts: a set of boxes
    that tiles a region either is one box equal to it, or can be split by some axis-aligned
    plane that no box crosses (found, for each axis, by sorting the boxes by their lower end
    and looking for a position the running maximum of their upper ends does not pass), and
    then each side must tile its half (one-cell leaves, the dense methods' files, are checked
    directly: distinct cells, as many as the domain has). Below 64 boxes, or when no plane is found, the boxes
    are compared pairwise (overlap on every axis means overlap) and their volumes, exact
    integers, must add up to the region's: disjoint boxes inside a region cover it exactly
    when their volumes add up. A tiling by boxes that no plane splits and that has more than
    20,000 boxes is refused, though valid (certdp's views never produce one)."""
    shp = np.asarray(shape, dtype=np.int64)
    if lo.shape != hi.shape or lo.ndim != 2 or lo.shape[1] != shp.size:
        raise fail(f"the leaves' lower and upper corners must both be {len(shape)}-column arrays of one length")
    if lo.shape[0] == 0:
        raise fail("the view has no leaf")
    if np.any(lo < 0) or np.any(hi > shp[None, :]) or np.any(hi <= lo):
        raise fail("a leaf lies outside the domain or is empty")
    cells = math.prod(shape)
    if np.all(hi - lo == 1) and cells < 2**62:       # one leaf per cell (Identity, HDMM, DAWA): distinct, all there
        if lo.shape[0] != cells:
            raise fail("two leaves overlap" if lo.shape[0] > cells else "the leaves leave part of the domain uncovered")
        if np.any(np.bincount(np.ravel_multi_index(tuple(lo.T), shape), minlength=cells) != 1):
            raise fail("two leaves overlap")
        return
    stack = [(np.zeros_like(shp), shp.copy(), np.arange(lo.shape[0]))]
    work, budget = 0, CUT_WORK * lo.shape[0] + CUT_ALLOWANCE
    while stack:
        r_lo, r_hi, idx = stack.pop()
        work += idx.size
        if work > budget:
            raise fail(f"the {lo.shape[0]} leaves need more than {budget:,} leaf visits to be told apart (each cut "
                       "splits off a few leaves): a tiling certdp does not produce at this size")
        if idx.size <= 64:
            _tile_pairwise(lo[idx], hi[idx], r_lo, r_hi, fail)
            continue
        cut = _find_cut(lo[idx], hi[idx])
        if cut is None:
            if idx.size > 20_000:
                raise fail(f"{idx.size} leaves of one region cannot be separated by a cut: they overlap, leave a "
                           "gap, or form a tiling that certdp does not produce")
            _tile_pairwise(lo[idx], hi[idx], r_lo, r_hi, fail)
            continue
        axis, pos = cut
        left = hi[idx, axis] <= pos
        l_hi, r_lo2 = r_hi.copy(), r_lo.copy()
        l_hi[axis], r_lo2[axis] = pos, pos
        stack.append((r_lo, l_hi, idx[left]))
        stack.append((r_lo2, r_hi, idx[~left]))


def _find_cut(lo: np.ndarray, hi: np.ndarray) -> tuple[int, int] | None:
    """An (axis, position) that no box crosses and that leaves boxes on both sides, the one
    nearest the middle of the boxes; None if there is none."""
    n = lo.shape[0]
    for axis in range(lo.shape[1]):
        order = np.argsort(lo[:, axis], kind="stable")
        a, b = lo[order, axis], hi[order, axis]
        reach = np.maximum.accumulate(b)[:-1]
        ok = np.flatnonzero(reach <= a[1:])            # cut after the first k + 1 boxes, at a[k + 1]
        if ok.size:
            k = ok[np.argmin(np.abs(ok + 1 - n / 2))]
            return axis, int(a[k + 1])
    return None


def _tile_pairwise(lo: np.ndarray, hi: np.ndarray, r_lo: np.ndarray, r_hi: np.ndarray, fail) -> None:
    """Boxes pairwise disjoint, with volumes adding up to the region's (exact integers)."""
    n = lo.shape[0]
    step = max(1, BLOCK // max(1, n * lo.shape[1]))
    for a in range(0, n, step):
        ov = np.all((np.minimum(hi[a:a + step, None, :], hi[None, :, :])
                     > np.maximum(lo[a:a + step, None, :], lo[None, :, :])), axis=2)
        ov[np.arange(ov.shape[0]), np.arange(a, a + ov.shape[0])] = False
        if ov.any():
            raise fail("two leaves overlap")
    sides = (hi - lo).astype(object)
    volume = sum(math.prod(row) for row in sides.tolist())
    if volume != math.prod((r_hi - r_lo).tolist()):
        raise fail("the leaves leave part of the domain uncovered")
