"""Sparse count tensors over declared domains (paper 004, section 3).

A count tensor has one axis per chosen column: categorical columns become codes over a
declared (public) value set, numeric columns become at most 100 equal-width bins over a
declared range. Only the non-zero cells are stored (coordinates and counts), so a 15-column
Adult tensor whose domain has about 10^19 cells is a few thousand rows.

Domains taken from the data itself leak information about the records (the set of values
present, the extremes). They are refused unless the caller passes ``accept_data_leak=True``,
which emits a :class:`DataDerivedDomainWarning` naming the columns. A value outside its
declared domain (or missing) is never dropped silently: ``overflow='refuse'`` (default) raises,
``overflow='bin'`` counts it in an explicit ``<overflow>`` bin appended to every column (to
every one, whether or not a row lands in it: the domain is released with the view and must not
depend on the records).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from numbers import Real
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from .. import _validate as V

OVERFLOW = "<overflow>"
MAX_BINS = 100


class DataDerivedDomainWarning(UserWarning):
    """A column's domain was read from the data (this leaks information about the records)."""


@dataclass(frozen=True)
class Domain:
    """The public domain of one column: categorical ``values`` or numeric ``(low, high, bins)``.

    Every domain is checked where it is made (``__post_init__``), whichever way it is made
    (:meth:`categorical`, :meth:`numeric`, :meth:`from_dict`, a domain file, a view file), so no
    path can build one that encodes values wrongly:

    * categorical ``values`` are a list (a string is not a list of its letters) of distinct,
      present scalars (strings, integers, finite floats, booleans) whose labels ``str(v)`` are
      distinct too (queries name values by their labels);
    * numeric ``low < high`` are finite numbers (not strings, not booleans) whose difference is
      finite, and the ``bins + 1`` bin edges ``low + (high - low) i / bins`` are strictly
      increasing in float64: a range so wide that ``high - low`` overflows, or so narrow that
      neighbouring edges round to one number, would put values in the wrong bins.
    """

    name: str
    values: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    bins: int | None = None
    overflow: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"a column name must be a string, got {type(self.name).__name__} {self.name!r}")
        if not isinstance(self.overflow, (bool, np.bool_)):
            raise TypeError(f"column {self.name!r}: overflow must be true or false, got {self.overflow!r}")
        object.__setattr__(self, "overflow", bool(self.overflow))
        if self.values is not None:
            if self.low is not None or self.high is not None or self.bins is not None:
                raise ValueError(f"column {self.name!r}: a domain has either values or low/high/bins, not both")
            object.__setattr__(self, "values", _value_set(self.name, self.values))
            return
        if self.low is None or self.high is None:
            raise ValueError(f"domain of column {self.name!r} needs 'values' or 'low' and 'high'")
        lo, hi = _number(f"low of column {self.name!r}", self.low), _number(f"high of column {self.name!r}", self.high)
        b = V.int_in_range(f"bins of column {self.name!r}", MAX_BINS if self.bins is None else self.bins, 1, MAX_BINS)
        if not lo < hi:
            raise ValueError(f"column {self.name!r}: the range must have low < high, got [{lo!r}, {hi!r}]")
        with np.errstate(over="ignore", invalid="ignore"):
            edges = bin_edges(lo, hi, b)
        if not (math.isfinite(hi - lo) and np.all(np.isfinite(edges)) and np.all(np.diff(edges) > 0)):
            raise ValueError(f"column {self.name!r}: [{lo!r}, {hi!r}] in {b} bins cannot be binned in float64 "
                             "(the width overflows or neighbouring bin edges are equal); use a narrower range, "
                             "fewer bins or a shifted scale")
        object.__setattr__(self, "low", lo)
        object.__setattr__(self, "high", hi)
        object.__setattr__(self, "bins", b)

    @staticmethod
    def categorical(name: str, values: Sequence[Any]) -> "Domain":
        """A categorical column with its public values (checked as every domain is)."""
        return Domain(name, values=values)  # type: ignore[arg-type]

    @staticmethod
    def numeric(name: str, low: float, high: float, bins: int = MAX_BINS) -> "Domain":
        """A numeric column binned into ``bins`` equal bins over [low, high]."""
        return Domain(name, low=low, high=high, bins=bins)

    @property
    def is_numeric(self) -> bool:
        """Whether the column is numeric (binned) rather than categorical."""
        return self.values is None

    @property
    def size(self) -> int:
        """The number of cells along this column (an overflow bin included)."""
        base = self.bins if self.is_numeric else len(self.values)  # type: ignore[arg-type]
        return int(base) + (1 if self.overflow else 0)

    def edges(self) -> np.ndarray:
        """The ``bins + 1`` bin edges of a numeric domain (bin ``i`` is ``[edge_i, edge_i+1)``, the
        last one closed)."""
        if not self.is_numeric:
            raise ValueError(f"column {self.name!r} is categorical: it has no bin edges")
        return bin_edges(self.low, self.high, self.bins)  # type: ignore[arg-type]

    def labels(self) -> list[str]:
        """A label for each cell: the value, or the bin's interval."""
        if self.is_numeric:
            e = self.edges()
            out = [f"[{e[i]:g}, {e[i + 1]:g})" for i in range(self.bins)]  # type: ignore[arg-type]
        else:
            out = [str(v) for v in self.values]  # type: ignore[union-attr]
        return out + ([OVERFLOW] if self.overflow else [])

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description (categorical values keep their JSON type: string, integer,
        float or boolean)."""
        if self.is_numeric:
            return {"name": self.name, "low": self.low, "high": self.high, "bins": self.bins, "overflow": self.overflow}
        return {"name": self.name, "values": list(self.values), "overflow": self.overflow}  # type: ignore[arg-type]

    @staticmethod
    def from_dict(d: Mapping[str, Any], name: str | None = None) -> "Domain":
        """Inverse of :meth:`to_dict`; also reads a user's domain file entry, whose column is
        ``name``. Unknown keys are refused (a misspelt ``bin`` must not fall back to 100 bins)."""
        label = name if name is not None else (d.get("name", "") if isinstance(d, Mapping) else "")
        if not isinstance(d, Mapping):
            raise ValueError(f"the domain of column {label!r} must be an object with 'values' or 'low' and 'high', "
                             f"got {type(d).__name__}")
        unknown = sorted(str(k) for k in set(d) - _DOMAIN_KEYS)
        if unknown:
            raise ValueError(f"the domain of column {label!r} has unknown keys {unknown}; it takes "
                             f"{sorted(_DOMAIN_KEYS - {'name'})}")
        if name is not None and "name" in d and d["name"] != name:
            raise ValueError(f"the domain of column {name!r} names another column, {d['name']!r}")
        if "values" not in d and not ("low" in d and "high" in d):
            raise ValueError(f"the domain of column {label!r} needs 'values' or 'low' and 'high'")
        return Domain(label, values=d.get("values"), low=d.get("low"), high=d.get("high"), bins=d.get("bins"),
                      overflow=d.get("overflow", False))

    def code_range(self, spec: str) -> list[tuple[int, int]]:
        """Half-open code intervals selected by ``spec``: ``a..b`` (numeric: the bins meeting
        [a, b]; either end may be omitted), a single number, or comma-separated categorical
        values (by their labels). An empty selection is an error. ``<overflow>`` names the
        overflow bin of a numeric column too."""
        spec = spec.strip()
        if not spec:
            raise ValueError(f"column {self.name!r}: empty range")
        if self.is_numeric and spec == OVERFLOW:
            if not self.overflow:
                raise ValueError(f"column {self.name!r} has no {OVERFLOW} bin")
            return [(self.size - 1, self.size)]
        if self.is_numeric:
            lo, hi = float(self.low), float(self.high)  # type: ignore[arg-type]
            ends = spec.split("..", 1) if ".." in spec else [spec, spec]
            a, z = (self._query_number(s, default, spec) for s, default in zip(ends, (lo, hi)))
            if a > z:
                raise ValueError(f"column {self.name!r}: empty range {spec!r}")
            a, z = max(a, lo), min(z, hi)
            if a > z:
                raise ValueError(f"column {self.name!r}: range {spec!r} lies outside the domain [{lo:g}, {hi:g}]")
            first, last = self._bins(np.asarray([a, z]))
            return [(int(first), int(last) + 1)]
        labels = self.labels()
        codes = []
        for tok in spec.split(","):
            tok = tok.strip()
            if tok not in labels:
                raise ValueError(f"column {self.name!r}: unknown value {tok!r} (values: {labels})")
            codes.append(labels.index(tok))
        codes = sorted(set(codes))
        runs, start = [], codes[0]
        for prev, cur in zip(codes, codes[1:] + [None]):
            if cur != prev + 1:
                runs.append((start, prev + 1))
                start = cur
        return runs

    def _query_number(self, text: str, default: float, spec: str) -> float:
        text = text.strip()
        if not text:
            return default
        try:
            v = float(text)
        except ValueError:
            raise ValueError(f"column {self.name!r}: {text!r} in the range {spec!r} is not a number") from None
        if not math.isfinite(v):
            raise ValueError(f"column {self.name!r}: the range {spec!r} must have finite ends")
        return v

    def _bins(self, x: np.ndarray) -> np.ndarray:
        """The bin of each value of ``x`` (all within ``[low, high]``), from the bin edges: the
        last edge belongs to the last bin."""
        return np.minimum(np.searchsorted(self.edges(), x, side="right") - 1, self.bins - 1)  # type: ignore

    def encode(self, col: pd.Series) -> np.ndarray:
        """Codes 0..size-1, with -1 where the value lies outside the declared domain."""
        if self.is_numeric:
            x = pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
            bad = ~np.isfinite(x) | (x < self.low) | (x > self.high)
            return np.where(bad, -1, self._bins(np.where(bad, self.low, x))).astype(np.int64)
        index = {v: i for i, v in enumerate(self.values)}   # type: ignore[arg-type]
        return np.fromiter((index.get(v, -1) for v in col.tolist()), dtype=np.int64, count=len(col))


_DOMAIN_KEYS = {"name", "values", "low", "high", "bins", "overflow"}


def bin_edges(low: float, high: float, bins: int) -> np.ndarray:
    """``low + (high - low) i / bins`` for i = 0..bins, the product taken before the division so
    that integer ranges get integer edges exactly (``(high - low) / bins * i`` does not: with
    ages 17-91 in 74 bins it would put 56 and 60 in the bin below theirs); the last edge is
    ``high``."""
    i = np.arange(bins + 1, dtype=np.float64)
    e = low + ((high - low) * i) / bins
    e[-1] = high
    return e


def _number(what: str, v: Any) -> float:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (Real, np.integer, np.floating)):
        raise TypeError(f"{what} must be a number, got {type(v).__name__} {v!r}"[:300])
    try:
        f = float(v)
    except OverflowError:
        f = math.inf
    if not math.isfinite(f):
        raise ValueError(f"{what} must be finite, got {f}")
    return f


_SCALARS = (str, bool, int, float)


def _value_set(name: str, values: Any) -> tuple[Any, ...]:
    """The categorical values as a tuple of plain Python scalars, checked: a list-like of
    distinct, present strings, integers, finite floats or booleans with distinct labels."""
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, (Sequence, np.ndarray, pd.Index,
                                                                           pd.Series)):
        raise TypeError(f"column {name!r}: the values must be a list, got {type(values).__name__} {values!r}"[:300])
    out = []
    for v in values:
        if isinstance(v, np.generic):
            v = v.item()
        if not isinstance(v, _SCALARS) or (isinstance(v, float) and not math.isfinite(v)):
            raise TypeError(f"column {name!r}: a value must be a string, an integer, a finite float or a boolean, "
                            f"got {type(v).__name__} {v!r}"[:300])
        out.append(v)
    if not out:
        raise ValueError(f"column {name!r}: the value set must not be empty")
    if len(set(out)) != len(out) or len({str(v) for v in out}) != len(out):
        raise ValueError(f"column {name!r}: the value set repeats a value (values are compared by value and by "
                         "label: 1, 1.0 and True are one value, 1 and '1' one label)")
    if OVERFLOW in {str(v) for v in out}:
        raise ValueError(f"column {name!r}: {OVERFLOW!r} is reserved for the overflow bin")
    unqueryable = [v for v in out if "," in str(v) or not str(v) or any(c.isspace() for c in str(v))]
    if unqueryable:
        # a query names values by label: its terms are split on spaces and its values on commas,
        # so 'a,b' would be read as a and b, 'New York' as 'New', and '' cannot be written
        raise ValueError(f"column {name!r}: the value {unqueryable[0]!r} is empty or holds a comma or a space, "
                         "which a query cannot name; rename it in the table and the domain"[:300])
    return tuple(out)


@dataclass(frozen=True)
class CountTensor:
    """Non-zero cells (``coords``, one row per cell) and their ``counts``, over ``domains``
    (checked when made: integer cells inside the domains, positive integer counts)."""

    domains: tuple[Domain, ...]
    coords: np.ndarray
    counts: np.ndarray

    def __post_init__(self) -> None:
        doms = tuple(self.domains)
        if not doms or not all(isinstance(d, Domain) for d in doms):
            raise TypeError("a count tensor needs a non-empty tuple of Domain objects")
        if len({d.name for d in doms}) != len(doms):
            raise ValueError("a count tensor's columns must have distinct names")
        coords, counts = np.asarray(self.coords), np.asarray(self.counts)
        if coords.dtype.kind not in "iu" or counts.dtype.kind not in "iu":
            raise TypeError("a count tensor's cells and counts must be integer arrays")
        coords = coords.astype(np.int64).reshape(-1, len(doms)) if coords.size else np.zeros((0, len(doms)), np.int64)
        counts = counts.astype(np.int64).reshape(-1)
        shape = np.asarray([d.size for d in doms], dtype=np.int64)
        if coords.shape[0] != counts.size or np.any(coords < 0) or np.any(coords >= shape[None, :]):
            raise ValueError("a count tensor's cells must lie in its domains, one count per cell")
        if np.any(counts < 1):
            raise ValueError("a count tensor holds the non-zero cells only: every count must be >= 1")
        object.__setattr__(self, "domains", doms)
        object.__setattr__(self, "coords", coords)
        object.__setattr__(self, "counts", counts)

    @property
    def shape(self) -> tuple[int, ...]:
        """The number of cells along each column."""
        return tuple(d.size for d in self.domains)

    @property
    def domain_size(self) -> int:
        """Number of cells (a Python int: it can exceed 2^63, and float64's range)."""
        return math.prod(self.shape)

    @property
    def cells_text(self) -> str:
        """The number of cells for messages: ``1.23e+45``, or ``10^400`` past float64's range
        (where ``format(n, '.3g')`` raises OverflowError)."""
        n = self.domain_size
        return f"{n:.3g}" if n < 1e308 else f"10^{len(str(n)) - 1}"

    @property
    def total(self) -> int:
        """The number of rows counted."""
        return int(self.counts.sum())

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns' names, in axis order."""
        return tuple(d.name for d in self.domains)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, columns: Sequence[str],
                   domains: Mapping[str, Domain] | None = None, *, accept_data_leak: bool = False,
                   overflow: str = "refuse", numeric_bins: int = MAX_BINS) -> "CountTensor":
        """Build the tensor of ``columns`` of ``frame`` over the declared ``domains``.

        Columns without a declared domain are refused, unless ``accept_data_leak`` is set; then
        their domain is read from the data (distinct values, or min/max for numbers) with a
        warning naming them.
        """
        V.choice("overflow", overflow, ("refuse", "bin"))
        cols = list(columns)
        if not cols:
            raise ValueError("columns must name at least one column")
        if len(set(cols)) != len(cols):
            raise ValueError("columns must not repeat a column")
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise ValueError(f"columns {missing} are not in the table (it has {list(frame.columns)})")
        if len(frame) == 0:
            raise ValueError("the table is empty")
        doms = dict(domains or {})
        unknown = [c for c in doms if c not in cols]
        if unknown:
            raise ValueError(f"domains given for columns that were not chosen: {unknown}")
        undeclared = [c for c in cols if c not in doms]
        if undeclared and not accept_data_leak:
            raise ValueError(f"no public domain declared for columns {undeclared}: pass their value sets or "
                             "ranges, or accept_data_leak=True to read them from the data (this leaks privacy)")
        if undeclared:
            warnings.warn(f"domains of columns {undeclared} were read from the data; this leaks information "
                          "about the records and is not covered by the privacy guarantee",
                          DataDerivedDomainWarning, stacklevel=2)
            for c in undeclared:
                s = frame[c]
                if pd.api.types.is_numeric_dtype(s):
                    lo, hi = float(s.min()), float(s.max())
                    doms[c] = Domain.numeric(c, lo, hi if hi > lo else lo + 1.0, numeric_bins)
                else:
                    doms[c] = Domain.categorical(c, sorted(s.dropna().unique().tolist(), key=str))
        codes = np.empty((len(frame), len(cols)), dtype=np.int64)
        final = []
        for j, c in enumerate(cols):
            d = doms[c]
            if overflow == "bin":
                # every column gets its bin, whether or not a row lands in it: the released domain
                # is public and must not depend on the records
                d = replace(d, overflow=True)
            code = d.encode(frame[c])
            out = code < 0
            if np.any(out):
                n_out = int(out.sum())
                if overflow == "refuse":
                    example = frame[c].to_numpy()[np.flatnonzero(out)[0]]
                    raise ValueError(f"column {c!r}: {n_out} rows lie outside the declared domain (e.g. {example!r}); "
                                     "widen the domain or pass overflow='bin' (CLI: --overflow bin)")
                code = np.where(out, d.size - 1, code)
            codes[:, j] = code
            final.append(d)
        cells, counts = np.unique(codes, axis=0, return_counts=True)
        return cls(tuple(final), cells, counts.astype(np.int64))

    @classmethod
    def from_file(cls, path: str | Path, columns: Sequence[str], domains: Mapping[str, Domain] | None = None,
                  names: Sequence[str] | None = None, **options: Any) -> "CountTensor":
        """Read a CSV or Parquet file (by extension) and build the tensor of ``columns``.
        ``names`` gives the column names of a CSV file without a header line."""
        return cls.from_frame(read_table(path, names), columns, domains, **options)


def read_table(path: str | Path, names: Sequence[str] | None = None) -> pd.DataFrame:
    """A CSV (``?`` and empty fields are missing) or Parquet file as a DataFrame."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"table not found: {p}")
    if p.suffix in (".parquet", ".pq"):
        return pd.read_parquet(p)
    kw: dict[str, Any] = {"skipinitialspace": True, "na_values": ["?"]}
    if names:
        kw.update(header=None, names=list(names))
    return pd.read_csv(p, **kw)
