"""Sparse count tensors over declared domains (paper 004, section 3).

A count tensor has one axis per chosen column: categorical columns become codes over a
declared (public) value set, numeric columns become at most 100 equal-width bins over a
declared range. Only the non-zero cells are stored (coordinates and counts), so a 15-column
Adult tensor whose domain has about 10^19 cells is a few thousand rows.

Domains taken from the data itself leak information about the records (the set of values
present, the extremes). They are refused unless the caller passes ``accept_data_leak=True``,
which emits a :class:`DataDerivedDomainWarning` naming the columns. A value outside its
declared domain (or missing) is never dropped silently: ``overflow='refuse'`` (default) raises,
``overflow='bin'`` counts it in an explicit ``<overflow>`` bin appended to that column.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path
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
    """The public domain of one column: categorical ``values`` or numeric ``(low, high, bins)``."""

    name: str
    values: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    bins: int | None = None
    overflow: bool = False

    @staticmethod
    def categorical(name: str, values: Sequence[Any]) -> "Domain":
        """A categorical column with its public values."""
        vals = tuple(values)
        if not vals:
            raise ValueError(f"column {name!r}: the value set must not be empty")
        if len(set(vals)) != len(vals):
            raise ValueError(f"column {name!r}: the value set repeats a value")
        return Domain(name, values=vals)

    @staticmethod
    def numeric(name: str, low: float, high: float, bins: int = MAX_BINS) -> "Domain":
        """A numeric column binned into ``bins`` equal bins over [low, high]."""
        lo, hi = float(low), float(high)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"column {name!r}: the range must be finite with low < high, got [{low}, {high}]")
        b = V.int_in_range(f"bins of column {name!r}", bins, 1, MAX_BINS)
        return Domain(name, low=lo, high=hi, bins=b)

    @property
    def is_numeric(self) -> bool:
        """Whether the column is numeric (binned) rather than categorical."""
        return self.values is None

    @property
    def size(self) -> int:
        """The number of cells along this column (an overflow bin included)."""
        base = self.bins if self.is_numeric else len(self.values)  # type: ignore[arg-type]
        return int(base) + (1 if self.overflow else 0)

    def labels(self) -> list[str]:
        """A label for each cell: the value, or the bin's interval."""
        if self.is_numeric:
            w = (self.high - self.low) / self.bins  # type: ignore[operator]
            out = [f"[{self.low + i * w:g}, {self.low + (i + 1) * w:g})" for i in range(self.bins)]  # type: ignore
        else:
            out = [str(v) for v in self.values]  # type: ignore[union-attr]
        return out + ([OVERFLOW] if self.overflow else [])

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description (categorical values are written as strings)."""
        if self.is_numeric:
            return {"name": self.name, "low": self.low, "high": self.high, "bins": self.bins, "overflow": self.overflow}
        return {"name": self.name, "values": [v if isinstance(v, (int, float, bool)) else str(v) for v in self.values],
                "overflow": self.overflow}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "Domain":
        """Inverse of :meth:`to_dict` (also reads a user's domain file entry; ``name`` may be given)."""
        if not isinstance(d, Mapping):
            raise ValueError(f"a domain must be a mapping with 'values' or 'low'/'high', got {d!r}")
        name = str(d.get("name", ""))
        if "values" in d:
            base = Domain.categorical(name, d["values"])
        elif "low" in d and "high" in d:
            base = Domain.numeric(name, d["low"], d["high"], d.get("bins", MAX_BINS))
        else:
            raise ValueError(f"domain of column {name!r} needs 'values' or 'low' and 'high'")
        if d.get("overflow", False):
            base = Domain(base.name, base.values, base.low, base.high, base.bins, overflow=True)
        return base

    def code_range(self, spec: str) -> list[tuple[int, int]]:
        """Half-open code intervals selected by ``spec``: ``a..b`` (numeric: the bins meeting
        [a, b]; either end may be omitted), a single number, or comma-separated categorical
        values. An empty selection is an error."""
        spec = spec.strip()
        if not spec:
            raise ValueError(f"column {self.name!r}: empty range")
        if self.is_numeric:
            lo, hi, b = float(self.low), float(self.high), int(self.bins)  # type: ignore[arg-type]
            if ".." in spec:
                a_s, b_s = spec.split("..", 1)
                a = float(a_s) if a_s.strip() else lo
                z = float(b_s) if b_s.strip() else hi
            else:
                a = z = float(spec)
            if not (math.isfinite(a) and math.isfinite(z)) or a > z:
                raise ValueError(f"column {self.name!r}: empty range {spec!r}")
            a, z = max(a, lo), min(z, hi)
            if a > z:
                raise ValueError(f"column {self.name!r}: range {spec!r} lies outside the domain [{lo:g}, {hi:g}]")
            first = min(b - 1, int(math.floor((a - lo) / (hi - lo) * b)))
            last = min(b - 1, int(math.floor((z - lo) / (hi - lo) * b)))
            return [(first, last + 1)]
        labels = [str(v) for v in self.values]  # type: ignore[union-attr]
        codes = []
        for tok in spec.split(","):
            tok = tok.strip()
            if tok == OVERFLOW and self.overflow:
                codes.append(self.size - 1)
                continue
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

    def encode(self, col: pd.Series) -> np.ndarray:
        """Codes 0..size-1, with -1 where the value lies outside the declared domain."""
        if self.is_numeric:
            x = pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64)
            lo, hi, b = self.low, self.high, self.bins
            code = np.floor((x - lo) / (hi - lo) * b)
            code = np.where(x == hi, b - 1, code)            # the top edge belongs to the last bin
            bad = ~np.isfinite(x) | (x < lo) | (x > hi)
            return np.where(bad, -1, code).astype(np.int64)
        index = {v: i for i, v in enumerate(self.values)}   # type: ignore[arg-type]
        return np.fromiter((index.get(v, -1) for v in col.tolist()), dtype=np.int64, count=len(col))


@dataclass(frozen=True)
class CountTensor:
    """Non-zero cells (``coords``, one row per cell) and their ``counts``."""

    domains: tuple[Domain, ...]
    coords: np.ndarray
    counts: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        """The number of cells along each column."""
        return tuple(d.size for d in self.domains)

    @property
    def domain_size(self) -> int:
        """Number of cells (a Python int: it can exceed 2^63)."""
        return math.prod(self.shape)

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
            code = d.encode(frame[c])
            out = code < 0
            if np.any(out):
                n_out = int(out.sum())
                if overflow == "refuse":
                    example = frame[c].to_numpy()[np.flatnonzero(out)[0]]
                    raise ValueError(f"column {c!r}: {n_out} rows lie outside the declared domain (e.g. {example!r}); "
                                     "widen the domain or pass overflow='bin' (CLI: --overflow bin)")
                d = Domain(d.name, d.values, d.low, d.high, d.bins, overflow=True)
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
