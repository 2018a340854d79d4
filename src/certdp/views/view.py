"""Private views and the range count queries they answer (paper 004, sections 3-4).

A :class:`BlockView` is the published result of a decomposition: disjoint hyper-rectangular
leaves ``[lo, hi)`` covering the domain, each with a noisy count. A range query is answered by
spreading each leaf's count uniformly over its cells: the answer is the sum over leaves of
(overlap volume / leaf volume) x noisy count (the paper's A(Q)). Only the leaves and the public
domains are stored; nothing about the records is kept beyond the DP outputs, so save/load is a
plain JSON file.

A :class:`Workload` is a list of boxes (half-open code ranges on every axis; an axis the query
does not name is whole). A query whose categorical selection is not contiguous becomes several
disjoint boxes with the same ``owner``; answers are summed per owner.

Every view answers the same way: ``view.answer("age=20..30 sex=Male")`` (one query, a list of
them, or a :class:`Workload`) returns a DataFrame with one row per query: ``query``,
``estimate`` and ``std``, the standard deviation of the noise in the estimate where the release
makes it known (:mod:`.noise`), NaN where it does not. ``view.estimates(workload)`` is the bare
array of estimates, for evaluations over thousands of queries. A saved view
(:mod:`.viewfile`) is read by :func:`load_view` and answers from the file alone: no table, no
domain file.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from .. import _validate as V
from ..randomness import RNGLike, as_generator
from .noise import NOISE_MODELS, KroneckerLaplace, LeafLaplace, NoiseModel, cells_variance, noise_from_dict
from .tensor import CountTensor, Domain
from .viewfile import Fields, ViewFileError, check_partition, read_view_file, write_view_file

#: The most boxes the queries of one call may expand to (a categorical selection that is not
#: contiguous on several columns multiplies them) ...
MAX_QUERY_BOXES = 1_000_000
#: ... and the most box coordinates (boxes x columns): each box is two rows of integers, and
#: 983,040 boxes over 60 columns held 4.8 GB in the answer's work arrays.
MAX_QUERY_ENTRIES = 20_000_000


@dataclass(frozen=True)
class Workload:
    """Boxes ``[lo, hi)`` (``q x d`` integer arrays) over a tensor's axes; box ``i`` belongs to
    query ``owner[i]`` (``n_queries`` in all)."""

    lo: np.ndarray
    hi: np.ndarray
    owner: np.ndarray
    n_queries: int
    text: tuple[str, ...] = ()

    @staticmethod
    def random(shape: Sequence[int], n: int = 3000, columns: int = 2, rng: RNGLike = None) -> "Workload":
        """``n`` random range queries, each over ``columns`` axes chosen uniformly among the
        combinations; on each chosen axis the width is uniform in 1..size and the start uniform
        among the positions where it fits (the HDPView/RIPOST random range workloads)."""
        shp = np.asarray([V.int_in_range("axis size", s, 1) for s in shape], dtype=np.int64)
        n = V.int_in_range("n", n, 1)
        k = V.int_in_range("columns", columns, 1, len(shp))
        g = as_generator(rng)
        combos = list(itertools.combinations(range(len(shp)), k))
        lo = np.zeros((n, len(shp)), dtype=np.int64)
        hi = np.broadcast_to(shp, (n, len(shp))).copy()
        pick = g.integers(len(combos), size=n)
        for i in range(n):
            for d in combos[pick[i]]:
                w = int(g.integers(1, shp[d] + 1))
                a = int(g.integers(0, shp[d] - w + 1))
                lo[i, d], hi[i, d] = a, a + w
        return Workload(lo, hi, np.arange(n), n)

    @staticmethod
    def parse(domains: Sequence[Domain], queries: Sequence[str]) -> "Workload":
        """Queries like ``"age=20..30 sex=Male"`` (space-separated ``column=range`` terms; see
        :meth:`Domain.code_range`). Unknown columns and empty ranges are refused."""
        if isinstance(queries, str) or not isinstance(queries, Sequence):
            raise TypeError(f"queries must be a list of query strings, got {type(queries).__name__} {queries!r}"[:300])
        names = [d.name for d in domains]
        n_axes = len(domains)
        most = min(MAX_QUERY_BOXES, MAX_QUERY_ENTRIES // max(1, n_axes))
        los: list[np.ndarray] = []
        his: list[np.ndarray] = []
        owners: list[np.ndarray] = []
        n_boxes = 0
        for qi, text in enumerate(queries):
            if not isinstance(text, str):
                raise TypeError(f"a query must be a string like 'age=20..30', got {type(text).__name__} {text!r}"[:300])
            per_axis: list[list[tuple[int, int]]] = [[(0, d.size)] for d in domains]
            terms = text.split()
            if not terms:
                raise ValueError("a query must name at least one column, e.g. 'age=20..30'")
            seen = set()
            for term in terms:
                if "=" not in term:
                    raise ValueError(f"query term {term!r} is not column=range")
                col, spec = term.split("=", 1)
                if col not in names:
                    raise ValueError(f"query names unknown column {col!r} (the view has {names})")
                if col in seen:
                    raise ValueError(f"query names column {col!r} twice")
                seen.add(col)
                j = names.index(col)
                per_axis[j] = domains[j].code_range(spec)
            count = math.prod(len(r) for r in per_axis)
            n_boxes += count
            if n_boxes > most:
                raise ValueError(f"the queries expand to more than {most:,} boxes over {n_axes} columns "
                                 "(selections of values that are not neighbours on several columns multiply them); "
                                 "ask fewer at a time")
            # the product of the axes' intervals, first axis slowest (as itertools.product)
            pick = np.indices([len(r) for r in per_axis]).reshape(n_axes, -1)
            ends = [np.asarray(r, dtype=np.int64) for r in per_axis]
            los.append(np.stack([e[p, 0] for e, p in zip(ends, pick)], axis=1))
            his.append(np.stack([e[p, 1] for e, p in zip(ends, pick)], axis=1))
            owners.append(np.full(count, qi, dtype=np.int64))
        return Workload(np.concatenate(los).reshape(-1, n_axes) if los else np.zeros((0, n_axes), dtype=np.int64),
                        np.concatenate(his).reshape(-1, n_axes) if his else np.zeros((0, n_axes), dtype=np.int64),
                        np.concatenate(owners) if owners else np.zeros(0, dtype=np.int64), len(queries),
                        tuple(queries))


def answer_boxes(lo: np.ndarray, hi: np.ndarray, values: np.ndarray, shape: Sequence[int],
                 work: Workload) -> np.ndarray:
    """Answers of ``work`` on leaves ``[lo, hi)`` with counts ``values`` spread uniformly."""
    return answer_and_variance(lo, hi, values, shape, work)[0]


def answer_and_variance(lo: np.ndarray, hi: np.ndarray, values: np.ndarray, shape: Sequence[int],
                        work: Workload, leaf_variance: np.ndarray | None = None, chunk_cells: int = 20_000_000
                        ) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`answer_boxes`, and, when ``leaf_variance`` (the variance of each leaf's noise,
    independent across leaves) is given, the variance of each answer's noise:
    ``sum_l f_l^2 var_l`` with ``f_l`` the share of leaf ``l`` inside the query, its boxes'
    shares added first (:mod:`.noise`)."""
    shp = np.asarray(shape, dtype=np.int64)
    if work.lo.shape[1] != shp.size:
        raise ValueError(f"the workload has {work.lo.shape[1]} axes, the view {shp.size}")
    side = (hi - lo).astype(np.float64)
    vals = np.asarray(values, dtype=np.float64)
    box_ans = np.zeros(work.lo.shape[0])
    var = None if leaf_variance is None else np.zeros(work.n_queries)
    # boxes are grouped by the axes their query restricts (any of its boxes), so that all boxes of
    # a query meet in one group and its leaves' fractions are summed before they are squared
    # (a box that does not restrict one of those axes spans it: its fraction there is 1)
    box_restricted = (work.lo > 0) | (work.hi < shp[None, :])
    by_query = np.zeros((work.n_queries, shp.size), dtype=bool)
    np.logical_or.at(by_query, work.owner, box_restricted)
    kinds, which = np.unique(by_query[work.owner], axis=0, return_inverse=True)
    which = np.asarray(which).reshape(-1)
    total = float(vals.sum())
    for g, row in enumerate(kinds):
        dims = tuple(np.flatnonzero(row))
        idx = np.flatnonzero(which == g)
        idx = idx[np.argsort(work.owner[idx], kind="stable")]          # each query's boxes together
        if not dims:
            box_ans[idx] = total
            if var is not None:
                n_boxes = np.bincount(work.owner[idx], minlength=work.n_queries)
                var += n_boxes.astype(np.float64) ** 2 * float(np.sum(leaf_variance))
            continue
        dd = list(dims)
        step = max(1, chunk_cells // max(1, lo.shape[0] * len(dd)))
        for piece in _chunks_by_owner(idx, work.owner, step):
            # a piece holds whole queries, or one query of more than ``step`` boxes, cut here into
            # parts whose leaves' fractions are summed before the variance squares them
            parts = [piece] if piece.size <= step else np.array_split(piece, -(-piece.size // step))
            acc = None
            for q in parts:
                ql, qh = work.lo[q][:, dd], work.hi[q][:, dd]                     # (b, k)
                ov = (np.minimum(qh[:, None, :], hi[None, :, dd]) - np.maximum(ql[:, None, :], lo[None, :, dd]))
                frac = np.prod(np.clip(ov, 0, None) / side[None, :, dd], axis=2)  # (b, L)
                box_ans[q] = frac @ vals
                if var is None:
                    continue
                own = work.owner[q]
                starts = np.flatnonzero(np.r_[True, own[1:] != own[:-1]])
                per_query = np.add.reduceat(frac, starts, axis=0)
                if len(parts) == 1:
                    var[own[starts]] += (per_query * per_query) @ leaf_variance
                else:
                    acc = per_query[0] if acc is None else acc + per_query[0]
            if var is not None and acc is not None:
                var[work.owner[piece[0]]] += (acc * acc) @ leaf_variance
    return np.bincount(work.owner, weights=box_ans, minlength=work.n_queries).astype(np.float64), var


def _chunks_by_owner(idx: np.ndarray, owner: np.ndarray, step: int) -> list[np.ndarray]:
    """``idx`` (sorted by owner) cut into pieces of at most ``step`` boxes that never split the
    boxes of one query; a query of more than ``step`` boxes is a piece of its own."""
    own = owner[idx]
    starts = np.flatnonzero(np.r_[True, own[1:] != own[:-1]])
    cuts, size = [], 0
    for s, e in zip(starts, np.r_[starts[1:], idx.size]):
        if size and size + (e - s) > step:
            cuts.append(s)
            size = 0
        size += e - s
    return np.split(idx, cuts)


def true_answers(tensor: CountTensor, work: Workload) -> np.ndarray:
    """Exact answers on the tensor (not private: for evaluation)."""
    return answer_boxes(tensor.coords, tensor.coords + 1, tensor.counts, tensor.shape, work)


def rmse(estimate: np.ndarray, truth: np.ndarray) -> float:
    """The root mean squared error of ``estimate`` against ``truth``."""
    e, t = np.asarray(estimate, dtype=np.float64), np.asarray(truth, dtype=np.float64)
    if e.shape != t.shape or e.size == 0:
        raise ValueError("estimate and truth must be non-empty arrays of one shape")
    return float(np.sqrt(np.mean((e - t) ** 2)))


def summed_area(a: np.ndarray) -> np.ndarray:
    """The summed-area table of ``a``: zero-padded at the start of every axis, cumulated."""
    sat = np.pad(np.asarray(a, dtype=np.float64), [(1, 0)] * a.ndim)
    for ax in range(sat.ndim):
        np.cumsum(sat, axis=ax, out=sat)
    return sat


def box_sums(sat: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Sums over the boxes ``[lo, hi)`` (one per row) from a summed-area table, by the
    inclusion-exclusion of its 2^d corners."""
    d = sat.ndim
    out = np.zeros(lo.shape[0])
    for corner in itertools.product((0, 1), repeat=d):
        idx = tuple(np.where(c, hi[:, j], lo[:, j]) for j, c in enumerate(corner))
        out += (-1) ** (d - sum(corner)) * sat[idx]
    return out


class _OverDomains:
    """What every view shares: shape and column names from its public domains, and answers."""

    domains: tuple[Domain, ...]
    method: str

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.domains)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.domains)

    def workload(self, queries: str | Sequence[str] | Workload) -> Workload:
        """``queries`` (one query string, a list of them, or a Workload) as a Workload."""
        if isinstance(queries, Workload):
            return queries
        return Workload.parse(self.domains, [queries] if isinstance(queries, str) else queries)

    def estimates(self, work: Workload) -> np.ndarray:
        """The estimate of every query of ``work`` (an array, for evaluations)."""
        raise NotImplementedError

    def std(self, work: Workload) -> np.ndarray:
        """The standard deviation of the noise in each estimate; NaN where it is not known."""
        return np.full(work.n_queries, np.nan)

    def answer(self, queries: str | Sequence[str] | Workload) -> pd.DataFrame:
        """One row per query: ``query`` (its text, or ``#i`` for a generated workload),
        ``estimate``, and ``std``, the standard deviation of the estimate's noise given the
        released structure (NaN where the method does not make it known; see :mod:`.noise`)."""
        work = self.workload(queries)
        text = list(work.text) if len(work.text) == work.n_queries else [f"#{i}" for i in range(work.n_queries)]
        return pd.DataFrame({"query": text, "estimate": self.estimates(work), "std": self.std(work)})

    def query(self, text: str) -> float:
        """The estimate of one query such as ``"age=20..30 sex=Male"``."""
        return float(self.estimates(self.workload(text))[0])

    def _header(self) -> dict[str, Any]:
        """What every saved view starts with: method, budget, parameters, ledger, domains."""
        return {"method": self.method, "epsilon": self.epsilon, "spent": self.spent,  # type: ignore[attr-defined]
                "params": self.params, "ledger": self.ledger,  # type: ignore[attr-defined]
                "domains": [d.to_dict() for d in self.domains]}


@dataclass
class BlockView(_OverDomains):
    """A released view: leaves ``[lo, hi)`` (``L x d``) with noisy counts ``values``.

    ``epsilon`` is the budget the view was built with and ``spent`` the exact largest path sum
    of the charges made (never above ``epsilon``); ``ledger`` totals the charges by kind;
    ``noise`` is the model of the values' noise (None: not known)."""

    domains: tuple[Domain, ...]
    lo: np.ndarray
    hi: np.ndarray
    values: np.ndarray
    method: str
    epsilon: float
    spent: float
    params: dict[str, Any] = field(default_factory=dict)
    ledger: dict[str, float] = field(default_factory=dict)
    noise: NoiseModel | None = None

    @property
    def n_blocks(self) -> int:
        """The number of blocks."""
        return int(self.values.size)

    def estimates(self, work: Workload) -> np.ndarray:
        """The estimates from the leaves, each spread uniformly over its cells."""
        return answer_boxes(self.lo, self.hi, self.values, self.shape, work)

    def std(self, work: Workload) -> np.ndarray:
        """The noise deviation of each estimate from the leaves' noise model (NaN without one)."""
        if isinstance(self.noise, LeafLaplace):
            var = answer_and_variance(self.lo, self.hi, self.values, self.shape, work,
                                      self.noise.leaf_variances(self.n_blocks))[1]
            return np.sqrt(var)
        if isinstance(self.noise, KroneckerLaplace):
            return np.sqrt(self.noise.variances(work.lo, work.hi, work.owner, work.n_queries))
        return super().std(work)

    def to_dict(self) -> dict[str, Any]:
        """The view file's content (without its format tag and digest)."""
        return {**self._header(), "noise_model": None if self.noise is None else self.noise.to_dict(),
                "lo": self.lo.tolist(), "hi": self.hi.tolist(), "values": [float(v) for v in self.values]}

    def save(self, path: str | Path) -> Path:
        """Write the view as a view file (:mod:`.viewfile`), atomically."""
        return write_view_file(self.to_dict(), path)

    @classmethod
    def load(cls, path: str | Path) -> "BlockView":
        """Read a view file as blocks."""
        v = load_view(path)
        if not isinstance(v, BlockView):
            raise ValueError(f"{path} holds a {v.method} view, not one of blocks")
        return v

    def check(self) -> None:
        """The leaves partition the domain, the values are finite, the spend is within epsilon."""
        def fail(msg: str) -> ValueError:
            return ValueError(f"inconsistent view: {msg}")

        check_partition(self.lo, self.hi, self.shape, fail)
        if self.lo.shape[0] != self.values.size:
            raise fail("leaves and values differ in number")
        if not np.all(np.isfinite(self.values)):
            raise fail("a leaf value is not finite")
        if not 0 <= self.spent <= self.epsilon:
            raise fail(f"spent {self.spent} is not within [0, epsilon = {self.epsilon}]")


MAX_SAVED_CELLS = 2_000_000


@dataclass
class DenseView(_OverDomains):
    """A view with one noisy count per cell (Identity, HDMM, DAWA). Queries use a summed-area
    table."""

    domains: tuple[Domain, ...]
    noisy: np.ndarray
    method: str
    epsilon: float
    spent: float
    params: dict[str, Any] = field(default_factory=dict)
    ledger: dict[str, float] = field(default_factory=dict)
    noise: NoiseModel | None = None
    _sat: np.ndarray | None = None

    @property
    def n_blocks(self) -> int:
        """The number of cells (each cell is a block)."""
        return int(self.noisy.size)

    def to_blocks(self) -> BlockView:
        """The same view as one unit leaf per cell (refused above ``MAX_SAVED_CELLS``)."""
        if self.noisy.size > MAX_SAVED_CELLS:
            raise ValueError(f"a {self.method} view holds one value per cell; {self.noisy.size:,} cells are above "
                             f"the {MAX_SAVED_CELLS:,} a view file takes (query it in Python instead)")
        lo = np.stack(np.unravel_index(np.arange(self.noisy.size), self.noisy.shape), axis=1).astype(np.int64)
        return BlockView(self.domains, lo, lo + 1, self.noisy.ravel().astype(np.float64), self.method, self.epsilon,
                         self.spent, self.params, self.ledger, self.noise)

    def save(self, path: str | Path) -> Path:
        """Write the view as a file of blocks."""
        return self.to_blocks().save(path)

    def estimates(self, work: Workload) -> np.ndarray:
        """The estimates from the noisy cells, through a summed-area table."""
        if self._sat is None:
            self._sat = summed_area(self.noisy)
        out = box_sums(self._sat, work.lo, work.hi)
        return np.bincount(work.owner, weights=out, minlength=work.n_queries).astype(np.float64)

    def std(self, work: Workload) -> np.ndarray:
        """The noise deviation of each estimate (i.i.d. cells or HDMM's strategy; NaN otherwise)."""
        if isinstance(self.noise, LeafLaplace) and np.ndim(self.noise.scale) == 0:
            return np.sqrt(cells_variance(float(self.noise.scale), work.lo, work.hi, work.owner, work.n_queries))
        if isinstance(self.noise, KroneckerLaplace):
            return np.sqrt(self.noise.variances(work.lo, work.hi, work.owner, work.n_queries))
        return super().std(work)


@dataclass
class SampleView(_OverDomains):
    """A view made of synthetic records (a synthesizer's output): the cells they occupy and how
    many records each holds. Queries count the synthetic records inside the box; the noise of
    a count of sampled records is not known in closed form (``std`` is NaN)."""

    domains: tuple[Domain, ...]
    coords: np.ndarray
    counts: np.ndarray
    method: str
    epsilon: float
    spent: float
    params: dict[str, Any] = field(default_factory=dict)
    ledger: dict[str, float] = field(default_factory=dict)

    @property
    def n_blocks(self) -> int:
        """The number of distinct synthetic records."""
        return int(self.counts.size)

    def estimates(self, work: Workload) -> np.ndarray:
        """The number of synthetic records in each query."""
        return answer_boxes(self.coords, self.coords + 1, self.counts.astype(np.float64), self.shape, work)

    def to_dict(self) -> dict[str, Any]:
        """The view file's content (without its format tag and digest)."""
        return {**self._header(),
                "records": {"coords": self.coords.tolist(), "counts": [int(c) for c in self.counts]}}

    def save(self, path: str | Path) -> Path:
        """The synthetic records (their cells and counts) as a view file, atomically."""
        return write_view_file(self.to_dict(), path)


@dataclass
class MarginalView(_OverDomains):
    """A view that is a fitted model of the data distribution (MST, AIM): a query box is
    answered exactly on the model's marginal over the axes the box restricts (computed once per
    set of axes, by ``marginal(axes)``, then summed through a summed-area table). The noise of
    a model's answer is not known in closed form (``std`` is NaN)."""

    domains: tuple[Domain, ...]
    marginal: Any
    method: str
    epsilon: float
    spent: float
    params: dict[str, Any] = field(default_factory=dict)
    ledger: dict[str, float] = field(default_factory=dict)
    n_blocks: int = 0
    _tables: dict[tuple[int, ...], np.ndarray] = field(default_factory=dict)

    def to_dict(self, degree: int = 2) -> dict[str, Any]:
        """The model's marginals over every set of at most ``degree`` axes (what a saved view can
        answer: queries restricting at most ``degree`` columns)."""
        d = len(self.domains)
        sets = [s for k in range(1, min(degree, d) + 1) for s in itertools.combinations(range(d), k)]
        return {**self._header(),
                "n_blocks": self.n_blocks,
                "marginals": [{"axes": list(s), "values": np.asarray(self.marginal(s), dtype=np.float64).ravel()
                               .tolist()} for s in sets]}

    def save(self, path: str | Path, degree: int = 2) -> Path:
        """The marginals over at most ``degree`` axes as a view file, atomically."""
        return write_view_file(self.to_dict(V.int_in_range("degree", degree, 1, 64)), path)

    def _sat(self, axes: tuple[int, ...]) -> np.ndarray:
        if axes not in self._tables:
            m = np.asarray(self.marginal(axes), dtype=np.float64).reshape([self.shape[a] for a in axes])
            self._tables[axes] = summed_area(m)
        return self._tables[axes]

    def estimates(self, work: Workload) -> np.ndarray:
        """The estimates from the model's marginal over the columns each query restricts."""
        shp = np.asarray(self.shape, dtype=np.int64)
        restricted = (work.lo > 0) | (work.hi < shp[None, :])
        out = np.zeros(work.lo.shape[0])
        keys = [tuple(np.flatnonzero(r)) for r in restricted]
        for axes in set(keys):
            rows = np.asarray([i for i, k in enumerate(keys) if k == axes])
            if not axes:                                  # the whole domain: the model's total
                out[rows] = float(self._sat((0,))[-1])
                continue
            ax = list(axes)
            out[rows] = box_sums(self._sat(axes), work.lo[np.ix_(rows, ax)], work.hi[np.ix_(rows, ax)])
        return np.bincount(work.owner, weights=out, minlength=work.n_queries).astype(np.float64)


# ------------------------------------------------------------------------- reading
_HEADER = {"format", "digest", "method", "epsilon", "spent", "params", "ledger", "domains"}


#: The methods that write each layout of a view file.
LAYOUTS = {"values": frozenset(NOISE_MODELS),
           "records": frozenset({"privbayes"}), "marginals": frozenset({"mst", "aim"})}


def load_view(path: str | Path) -> "BlockView | SampleView | MarginalView":
    """A saved view of any method, checked (:mod:`.viewfile`): blocks (decompositions;
    Identity, HDMM and DAWA as one leaf per cell), synthetic records (PrivBayes) or marginals
    (MST, AIM). Everything a query needs is in the file."""
    d, where = read_view_file(path)
    f = Fields(d, where)
    kinds = [k for k in ("values", "records", "marginals") if k in d]
    if len(kinds) != 1:
        raise f.fail("a view file holds exactly one of 'values' (leaves), 'records' or 'marginals'")
    head = _read_header(f)
    if head["method"] not in LAYOUTS[kinds[0]]:
        # the method's name decides which checks apply (a noise model, its kind): a layout that
        # method does not write is refused, so a name cannot borrow another layout's checks
        raise f.fail(f"a view of method {head['method']!r} is not written as {kinds[0]!r}; "
                     f"that layout is {', '.join(sorted(LAYOUTS[kinds[0]]))}'s")
    if kinds[0] == "values":
        return _read_blocks(f, head)
    if kinds[0] == "records":
        return _read_records(f, head)
    return _read_marginals(f, head)


def _read_header(f: Fields) -> dict[str, Any]:
    """Method, epsilon, spent, params, ledger and domains, checked: epsilon > 0 and
    0 <= spent <= epsilon, finite; every ledger entry a finite positive charge."""
    eps, spent = f.number("epsilon"), f.number("spent")
    if eps <= 0:
        raise f.fail(f"epsilon must be > 0, got {eps}")
    if not 0 <= spent <= eps:
        raise f.fail(f"spent ({spent}) must lie in [0, epsilon = {eps}]")
    ledger = f.mapping("ledger")
    for what, charge in ledger.items():
        if f.number(f"ledger entry {what!r}", charge) <= 0:
            raise f.fail(f"the ledger entry {what!r} charges {charge}, not a positive epsilon")
    raw = f.get("domains")
    if not isinstance(raw, list) or not raw:
        raise f.fail("'domains' must be a non-empty list")
    try:
        doms = tuple(Domain.from_dict(x) for x in raw)
    except (ValueError, TypeError) as exc:
        raise f.fail(f"a domain is invalid: {exc}") from None
    if len({dm.name for dm in doms}) != len(doms):
        raise f.fail("two domains have one column name")
    return {"domains": doms, "method": f.text("method"), "epsilon": eps, "spent": spent,
            "params": f.mapping("params"), "ledger": {str(k): float(v) for k, v in ledger.items()}}


def _read_blocks(f: Fields, head: dict[str, Any]) -> BlockView:
    f.only(_HEADER | {"noise_model", "lo", "hi", "values"})
    doms = head["domains"]
    shape = tuple(dm.size for dm in doms)
    lo = f.array("lo", f.get("lo"), "i", 2)
    hi = f.array("hi", f.get("hi"), "i", 2)
    vals = f.array("values", f.get("values"), "f", 1)
    check_partition(lo, hi, shape, f.fail)
    if vals.size != lo.shape[0]:
        raise f.fail(f"{vals.size} values for {lo.shape[0]} leaves")
    noise = noise_from_dict(f.get("noise_model"), head["method"], head["epsilon"], lo.shape[0], shape, f)
    return BlockView(doms, lo, hi, vals, head["method"], head["epsilon"], head["spent"], head["params"],
                     head["ledger"], noise)


def _read_records(f: Fields, head: dict[str, Any]) -> SampleView:
    f.only(_HEADER | {"records"})
    rec = f.mapping("records")
    if set(rec) != {"coords", "counts"}:
        raise f.fail("'records' must hold exactly 'coords' and 'counts'")
    shape = np.asarray([dm.size for dm in head["domains"]], dtype=np.int64)
    coords = f.array("records.coords", rec["coords"], "i", 2).reshape(-1, shape.size)
    counts = f.array("records.counts", rec["counts"], "i", 1)
    if coords.shape[0] != counts.size:
        raise f.fail(f"{coords.shape[0]} record cells for {counts.size} counts")
    if np.any(coords < 0) or np.any(coords >= shape[None, :]):
        raise f.fail("a synthetic record lies outside the domain")
    if np.any(counts < 1):
        raise f.fail("a synthetic record count is below 1")
    if np.unique(coords, axis=0).shape[0] != coords.shape[0]:
        raise f.fail("a cell of synthetic records is listed twice")
    return SampleView(head["domains"], coords, counts, head["method"], head["epsilon"], head["spent"],
                      head["params"], head["ledger"])


def _read_marginals(f: Fields, head: dict[str, Any]) -> MarginalView:
    f.only(_HEADER | {"marginals", "n_blocks"})
    doms = head["domains"]
    shape = [x.size for x in doms]
    raw = f.get("marginals")
    if not isinstance(raw, list) or not raw:
        raise f.fail("'marginals' must be a non-empty list")
    table = {}
    for m in raw:
        if not isinstance(m, dict) or set(m) != {"axes", "values"}:
            raise f.fail("each marginal must hold exactly 'axes' and 'values'")
        axes_arr = f.array("marginal axes", m["axes"], "i", 1)
        axes = tuple(int(a) for a in axes_arr)
        if not axes or any(a < 0 or a >= len(shape) for a in axes) or list(axes) != sorted(set(axes)):
            raise f.fail(f"marginal axes {list(axes)} must be distinct column numbers in increasing order")
        if axes in table:
            raise f.fail(f"the marginal over axes {list(axes)} is given twice")
        vals = f.array("marginal values", m["values"], "f", 1)
        if vals.size != math.prod(shape[a] for a in axes):
            raise f.fail(f"the marginal over axes {list(axes)} has {vals.size} values for "
                         f"{math.prod(shape[a] for a in axes)} cells")
        table[axes] = vals.reshape([shape[a] for a in axes])
    n_blocks = f.get("n_blocks")
    if isinstance(n_blocks, bool) or not isinstance(n_blocks, int) or n_blocks < 0:
        raise f.fail("'n_blocks' must be an integer >= 0")
    most = max(len(a) for a in table)
    method = head["method"]

    def marginal(axes: tuple[int, ...]) -> np.ndarray:
        if axes not in table:
            names = [doms[a].name for a in axes]
            raise ValueError(f"this saved {method} view holds marginals over at most {most} columns; "
                             f"a query restricting {names} needs more (save it with a larger degree)")
        return table[axes]

    return MarginalView(doms, marginal, method, head["epsilon"], head["spent"], head["params"], head["ledger"],
                        n_blocks)


__all__ = ["BlockView", "DenseView", "MarginalView", "SampleView", "ViewFileError", "Workload", "answer_and_variance",
           "answer_boxes", "box_sums", "load_view", "rmse", "summed_area", "true_answers"]
