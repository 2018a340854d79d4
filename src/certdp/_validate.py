"""Argument checks shared by every public entry point.

Each check raises ``ValueError`` or ``TypeError`` whose message names the argument, the value
received and what is allowed, so that a bad call fails before anything is computed or written.
"""

from __future__ import annotations

import functools
import math
import os
from numbers import Integral, Real
from typing import Any

import numpy as np


def positive_float(name: str, value: Any, *, allow_inf: bool = False) -> float:
    """Return ``value`` as a float after checking that it is a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, (Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    v = float(value)
    if math.isnan(v):
        raise ValueError(f"{name} must be > 0, got NaN")
    if math.isinf(v) and not (allow_inf and v > 0):
        raise ValueError(f"{name} must be finite and > 0, got {v}")
    if v <= 0:
        raise ValueError(f"{name} must be > 0, got {v}")
    return v


def finite_float(name: str, value: Any) -> float:
    """Return ``value`` as a float after checking that it is a finite number."""
    if isinstance(value, bool) or not isinstance(value, (Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {v}")
    return v


def nonneg_float(name: str, value: Any) -> float:
    """Return ``value`` as a float after checking that it is a finite number >= 0."""
    if isinstance(value, bool) or not isinstance(value, (Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {v}")
    return v


def open_unit(name: str, value: Any, *, upper_closed: bool = False) -> float:
    """Return ``value`` as a float after checking it lies in (0, 1) (or (0, 1])."""
    if isinstance(value, bool) or not isinstance(value, (Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    v = float(value)
    ok = (0.0 < v <= 1.0) if upper_closed else (0.0 < v < 1.0)
    if not ok:
        allowed = "(0, 1]" if upper_closed else "(0, 1)"
        raise ValueError(f"{name} must lie in {allowed}, got {v}")
    return v


def int_in_range(name: str, value: Any, lo: int, hi: int | None = None) -> int:
    """Return ``value`` as an int after checking ``lo <= value (<= hi)``."""
    if isinstance(value, bool) or not isinstance(value, (Integral, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    v = int(value)
    if v < lo or (hi is not None and v > hi):
        allowed = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ValueError(f"{name} must be {allowed}, got {v}")
    return v


def finite_array(name: str, value: Any, *, ndim: int | None = None, nonneg: bool = False,
                 dtype: Any = np.float64) -> np.ndarray:
    """Return ``value`` as a float array after checking shape, finiteness and sign."""
    try:
        arr = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array: {exc}") from None
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(f"{name} must contain only finite values; {bad} entries are NaN or inf")
    if nonneg and arr.size and float(arr.min()) < 0:
        raise ValueError(f"{name} must be non-negative; smallest entry is {float(arr.min())}")
    return arr


def choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    """Check that ``value`` is one of the ``allowed`` strings."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")
    return str(value)


@functools.lru_cache(maxsize=1)
def memory_limit() -> int:
    """Bytes of memory this process may use: the machine's physical memory, or the container's
    limit (cgroup) when that is lower."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 2**63
    for f in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(f) as fh:
                text = fh.read().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return int(total)


def fits_in_memory(what: str, n_bytes: float) -> None:
    """Refuse (ValueError with the estimate) work whose memory would exceed what this process
    may use, before anything is allocated."""
    limit = memory_limit()
    if n_bytes > limit:
        raise ValueError(f"{what} needs about {n_bytes / 1e9:.3g} GB of memory, more than the "
                         f"{limit / 1e9:.3g} GB this machine allows; use a smaller instance")
