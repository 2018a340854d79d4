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

try:
    import resource
except ImportError:   # not on Windows: no address-space limit to read
    resource = None  # type: ignore[assignment]

import numpy as np


def _float(value: Any) -> float:
    """``float(value)``, with an integer beyond float64's range read as +-inf (``float`` raises
    OverflowError for it: a 400-digit JSON integer), so that the range checks refuse it."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def positive_float(name: str, value: Any, *, allow_inf: bool = False) -> float:
    """Return ``value`` as a float after checking that it is a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, (Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    v = _float(value)
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
    v = _float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {v}")
    return v


def nonneg_float(name: str, value: Any) -> float:
    """Return ``value`` as a float after checking that it is a finite number >= 0."""
    if isinstance(value, bool) or not isinstance(value, (Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    v = _float(value)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {v}")
    return v


def open_unit(name: str, value: Any, *, upper_closed: bool = False) -> float:
    """Return ``value`` as a float after checking it lies in (0, 1) (or (0, 1])."""
    if isinstance(value, bool) or not isinstance(value, (Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    v = _float(value)
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


def real_array(name: str, value: Any, *, ndim: int | None = None, dtype: Any = np.float64) -> np.ndarray:
    """Return ``value`` as a real array of ``dtype`` (NaN and inf kept). Refuses what the
    conversion would silently change: complex numbers (numpy would drop the imaginary part),
    strings, booleans and objects."""
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array: {exc}") from None
    if raw.dtype.kind == "c":
        raise TypeError(f"{name} must be real, got complex numbers ({raw.dtype})")
    if raw.dtype.kind not in "fiu":
        raise TypeError(f"{name} must be a numeric array, got {raw.dtype} values")
    arr = raw.astype(dtype, copy=False)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {arr.shape}")
    return arr


def finite_array(name: str, value: Any, *, ndim: int | None = None, nonneg: bool = False,
                 dtype: Any = np.float64) -> np.ndarray:
    """Return ``value`` as a real array (:func:`real_array`) after checking shape, finiteness
    and sign."""
    arr = real_array(name, value, ndim=ndim, dtype=dtype)
    if not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(f"{name} must contain only finite values; {bad} entries are NaN or inf")
    if nonneg and arr.size and float(arr.min()) < 0:
        raise ValueError(f"{name} must be non-negative; smallest entry is {float(arr.min())}")
    return arr


def int_array(name: str, value: Any, *, ndim: int | None = None, lo: int | None = None,
              hi: int | None = None) -> np.ndarray:
    """Return ``value`` as an int64 array after checking that it holds integers (a float,
    complex, boolean or string array is refused, never truncated), its shape and its range
    ``[lo, hi]``."""
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an integer array: {exc}") from None
    if raw.dtype.kind not in "iu" and not (raw.size == 0 and raw.dtype.kind == "f"):
        raise TypeError(f"{name} must hold integers, got {raw.dtype} values")
    if raw.dtype.kind == "u" and raw.size and int(raw.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"{name} holds integers beyond int64")
    arr = raw.astype(np.int64, copy=False)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {arr.shape}")
    if arr.size and ((lo is not None and int(arr.min()) < lo) or (hi is not None and int(arr.max()) > hi)):
        allowed = f">= {lo}" if hi is None else (f"<= {hi}" if lo is None else f"in [{lo}, {hi}]")
        raise ValueError(f"{name} must be {allowed}; it holds {int(arr.min())} .. {int(arr.max())}")
    return arr


def choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    """Check that ``value`` is one of the ``allowed`` strings."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")
    return str(value)


#: Entries per block of a scan whose whole array would not fit (an mDP pair's direction x an
#: output in the audit, certification and the row repairs of :mod:`certdp.pmo.upper`; a row of
#: path distances or of squared distances elsewhere): a float array of a block is 16 MB, where
#: a whole scan at 10,000 records with 200 neighbours and 100 outputs is 1.6 GB an array.
BLOCK = 2_000_000


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


def fits_in_memory(what: str, n_bytes: float, hint: str = "use a smaller instance") -> None:
    """Refuse (ValueError with the estimate and ``hint``) work whose memory would exceed what
    this process may use, before anything is allocated."""
    limit = memory_limit()
    if n_bytes > limit:
        raise ValueError(f"{what} needs about {n_bytes / 1e9:.3g} GB of memory, more than the "
                         f"{limit / 1e9:.3g} GB this machine allows; {hint}")


def _proc_bytes(path: str, key: str) -> int | None:
    """The ``key:`` line of a /proc file given in kB, in bytes; None where it cannot be read."""
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def available_memory() -> int:
    """Bytes this process may still allocate: the memory the kernel reports available, and at
    most what is left under an address-space limit (``prlimit --as``, ``ulimit -v``)."""
    reported = _proc_bytes("/proc/meminfo", "MemAvailable")
    avail = math.inf if reported is None else reported
    if resource is not None:
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            avail = min(avail, soft - (_proc_bytes("/proc/self/status", "VmSize") or 0))
    return int(avail) if math.isfinite(avail) else 2**62
