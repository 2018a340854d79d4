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
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .. import _validate as V
from .._io import atomic_target, load_json
from ..randomness import RNGLike, as_generator
from .tensor import CountTensor, Domain

FORMAT = "certdp-view/1"


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
        names = [d.name for d in domains]
        los, his, owners = [], [], []
        for qi, text in enumerate(queries):
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
            for box in itertools.product(*per_axis):
                los.append([a for a, _ in box])
                his.append([b for _, b in box])
                owners.append(qi)
        return Workload(np.asarray(los, dtype=np.int64).reshape(-1, len(domains)),
                        np.asarray(his, dtype=np.int64).reshape(-1, len(domains)),
                        np.asarray(owners, dtype=np.int64), len(queries), tuple(queries))


def answer_boxes(lo: np.ndarray, hi: np.ndarray, values: np.ndarray, shape: Sequence[int],
                 work: Workload, chunk_cells: int = 20_000_000) -> np.ndarray:
    """Answers of ``work`` on leaves ``[lo, hi)`` with counts ``values`` spread uniformly."""
    shp = np.asarray(shape, dtype=np.int64)
    if work.lo.shape[1] != shp.size:
        raise ValueError(f"the workload has {work.lo.shape[1]} axes, the view {shp.size}")
    side = (hi - lo).astype(np.float64)
    vals = np.asarray(values, dtype=np.float64)
    box_ans = np.zeros(work.lo.shape[0])
    restricted = (work.lo > 0) | (work.hi < shp[None, :])
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, row in enumerate(restricted):
        groups.setdefault(tuple(np.flatnonzero(row)), []).append(i)
    total = float(vals.sum())
    for dims, members in groups.items():
        idx = np.asarray(members)
        if not dims:
            box_ans[idx] = total
            continue
        dd = list(dims)
        step = max(1, chunk_cells // max(1, lo.shape[0] * len(dd)))
        for a in range(0, idx.size, step):
            q = idx[a:a + step]
            ql, qh = work.lo[q][:, dd], work.hi[q][:, dd]                     # (b, k)
            ov = (np.minimum(qh[:, None, :], hi[None, :, dd]) - np.maximum(ql[:, None, :], lo[None, :, dd]))
            frac = np.clip(ov, 0, None) / side[None, :, dd]                 # (b, L, k)
            box_ans[q] = np.prod(frac, axis=2) @ vals
    return np.bincount(work.owner, weights=box_ans, minlength=work.n_queries)


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
    """Shape and column names of a view, from its public domains."""

    domains: tuple[Domain, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.domains)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.domains)


@dataclass
class BlockView(_OverDomains):
    """A released view: leaves ``[lo, hi)`` (``L x d``) with noisy counts ``values``.

    ``epsilon`` is the budget the view was built with and ``spent`` the exact largest path sum
    of the charges made (never above ``epsilon``); ``ledger`` totals the charges by kind."""

    domains: tuple[Domain, ...]
    lo: np.ndarray
    hi: np.ndarray
    values: np.ndarray
    method: str
    epsilon: float
    spent: float
    params: dict[str, Any] = field(default_factory=dict)
    ledger: dict[str, float] = field(default_factory=dict)

    @property
    def n_blocks(self) -> int:
        """The number of blocks."""
        return int(self.values.size)

    def answer(self, work: Workload) -> np.ndarray:
        """The answers of the workload's range queries from the blocks (uniform within each block)."""
        return answer_boxes(self.lo, self.hi, self.values, self.shape, work)

    def query(self, text: str) -> float:
        """Answer one query such as ``"age=20..30 sex=Male"``."""
        return float(self.answer(Workload.parse(self.domains, [text]))[0])

    def to_dict(self) -> dict[str, Any]:
        """The view as a JSON-ready dictionary (the view file's content)."""
        return {**_header(self),
                "lo": self.lo.tolist(), "hi": self.hi.tolist(), "values": [float(v) for v in self.values]}

    def save(self, path: str | Path) -> Path:
        """Write the view as JSON, atomically (a failed write leaves nothing behind)."""
        return _write(self.to_dict(), path)

    @classmethod
    def load(cls, path: str | Path) -> "BlockView":
        """Read a view file as blocks."""
        v = load_view(path)
        if not isinstance(v, BlockView):
            raise ValueError(f"{path} holds a {v.method} view, not one of blocks")
        return v

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "BlockView":
        """The view described by ``d`` (a view file's content)."""
        doms = tuple(Domain.from_dict(x) for x in d["domains"])
        k = len(doms)
        lo = np.asarray(d["lo"], dtype=np.int64).reshape(-1, k)
        hi = np.asarray(d["hi"], dtype=np.int64).reshape(-1, k)
        vals = np.asarray(d["values"], dtype=np.float64)
        v = cls(doms, lo, hi, vals, *_saved_fields(d))
        v.check()
        return v

    def check(self) -> None:
        """The leaves lie in the domain, are non-empty and their volumes add up to the domain's."""
        shp = np.asarray(self.shape, dtype=np.int64)
        if self.lo.shape != self.hi.shape or self.lo.shape[0] != self.values.size:
            raise ValueError("inconsistent view: leaves and values differ in number")
        if np.any(self.lo < 0) or np.any(self.hi > shp) or np.any(self.hi <= self.lo):
            raise ValueError("inconsistent view: a leaf lies outside the domain or is empty")
        if not np.all(np.isfinite(self.values)):
            raise ValueError("inconsistent view: a leaf value is not finite")
        vol = float(np.sum(np.prod((self.hi - self.lo).astype(np.float64), axis=1)))
        full = float(math.prod(self.shape))
        if abs(vol - full) > 1e-9 * full:
            raise ValueError(f"inconsistent view: leaves cover {vol:g} cells of {full:g}")
        if self.spent > self.epsilon:
            raise ValueError("inconsistent view: spent more than its epsilon")


def _header(view) -> dict[str, Any]:
    """What every saved view starts with: format, method, budget, parameters, ledger, domains."""
    return {"format": FORMAT, "method": view.method, "epsilon": view.epsilon, "spent": view.spent,
            "params": view.params, "ledger": view.ledger, "domains": [d.to_dict() for d in view.domains]}


def _saved_fields(d: dict[str, Any]) -> tuple[str, float, float, dict[str, Any], dict[str, float]]:
    """The fields :func:`_header` wrote, back: method, epsilon, spent, parameters, ledger."""
    return (str(d["method"]), float(d["epsilon"]), float(d["spent"]), dict(d.get("params", {})),
            dict(d.get("ledger", {})))


def _write(payload: dict[str, Any], path: str | Path) -> Path:
    p = Path(path)
    with atomic_target(p, ".json") as tmp:
        with open(tmp, "w") as f:
            json.dump(payload, f)
    return p


def load_view(path: str | Path) -> "BlockView | SampleView | MarginalView":
    """A saved view of any method: blocks (decompositions; Identity, HDMM and DAWA as one leaf
    per cell), synthetic records (PrivBayes) or marginals (MST, AIM)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"view not found: {p}")
    try:
        d = load_json(p.read_bytes(), f"view file {p}")
    except OSError as exc:
        raise ValueError(f"cannot read the view file {p}: {exc.strerror or exc}") from None
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise ValueError(f"{p} is not a {FORMAT} file")
    if "marginals" in d:
        return MarginalView.from_dict(d)
    return SampleView.from_dict(d) if "records" in d else BlockView.from_dict(d)


MAX_SAVED_CELLS = 2_000_000


@dataclass
class DenseView(_OverDomains):
    """A view with one noisy count per cell (Identity). Queries use a summed-area table."""

    domains: tuple[Domain, ...]
    noisy: np.ndarray
    method: str
    epsilon: float
    spent: float
    params: dict[str, Any] = field(default_factory=dict)
    ledger: dict[str, float] = field(default_factory=dict)
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
                         self.spent, self.params, self.ledger)

    def save(self, path: str | Path) -> Path:
        """Write the view as a file of blocks."""
        return self.to_blocks().save(path)

    def answer(self, work: Workload) -> np.ndarray:
        """The answers of the workload's range queries from the noisy cells (summed-area table)."""
        if self._sat is None:
            self._sat = summed_area(self.noisy)
        out = box_sums(self._sat, work.lo, work.hi)
        return np.bincount(work.owner, weights=out, minlength=work.n_queries)


@dataclass
class SampleView(_OverDomains):
    """A view made of synthetic records (a synthesizer's output): the cells they occupy and how
    many records each holds. Queries count the synthetic records inside the box."""

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

    def answer(self, work: Workload) -> np.ndarray:
        """The answers of the workload's range queries counted on the synthetic records."""
        return answer_boxes(self.coords, self.coords + 1, self.counts.astype(np.float64), self.shape, work)

    def to_dict(self) -> dict[str, Any]:
        """The view as a JSON-ready dictionary (the view file's content)."""
        return {**_header(self),
                "records": {"coords": self.coords.tolist(), "counts": [int(c) for c in self.counts]}}

    def save(self, path: str | Path) -> Path:
        """The synthetic records (their cells and counts) as JSON, atomically."""
        return _write(self.to_dict(), path)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SampleView":
        """The view described by ``d`` (a view file's content)."""
        doms = tuple(Domain.from_dict(x) for x in d["domains"])
        coords = np.asarray(d["records"]["coords"], dtype=np.int64).reshape(-1, len(doms))
        counts = np.asarray(d["records"]["counts"], dtype=np.int64)
        if coords.shape[0] != counts.size or np.any(coords < 0) or np.any(coords >= np.asarray([x.size for x in doms])):
            raise ValueError("inconsistent view: synthetic records outside the domain or miscounted")
        return cls(doms, coords, counts, *_saved_fields(d))


@dataclass
class MarginalView(_OverDomains):
    """A view that is a fitted model of the data distribution (MST): a query box is answered
    exactly on the model's marginal over the axes the box restricts (computed once per set of
    axes, by ``marginal(axes)``, then summed through a summed-area table)."""

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
        return {**_header(self),
                "n_blocks": self.n_blocks,
                "marginals": [{"axes": list(s), "values": np.asarray(self.marginal(s), dtype=np.float64).ravel()
                               .tolist()} for s in sets]}

    def save(self, path: str | Path, degree: int = 2) -> Path:
        """The marginals over at most ``degree`` axes as JSON, atomically."""
        return _write(self.to_dict(V.int_in_range("degree", degree, 1)), path)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "MarginalView":
        """The view described by ``d`` (a view file's content)."""
        doms = tuple(Domain.from_dict(x) for x in d["domains"])
        shape = [x.size for x in doms]
        table = {}
        for m in d["marginals"]:
            axes = tuple(int(a) for a in m["axes"])
            vals = np.asarray(m["values"], dtype=np.float64)
            if vals.size != math.prod(shape[a] for a in axes) or not np.all(np.isfinite(vals)):
                raise ValueError(f"inconsistent view: the marginal over axes {list(axes)} is malformed")
            table[axes] = vals.reshape([shape[a] for a in axes])
        most = max((len(a) for a in table), default=0)

        def marginal(axes: tuple[int, ...]) -> np.ndarray:
            if axes not in table:
                names = [doms[a].name for a in axes]
                raise ValueError(f"this saved {d['method']} view holds marginals over at most {most} columns; "
                                 f"a query restricting {names} needs more (save it with a larger degree)")
            return table[axes]

        return cls(doms, marginal, *_saved_fields(d), int(d.get("n_blocks", 0)))

    def _sat(self, axes: tuple[int, ...]) -> np.ndarray:
        if axes not in self._tables:
            m = np.asarray(self.marginal(axes), dtype=np.float64).reshape([self.shape[a] for a in axes])
            self._tables[axes] = summed_area(m)
        return self._tables[axes]

    def answer(self, work: Workload) -> np.ndarray:
        """The answers of the workload's range queries from the model's marginals."""
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
        return np.bincount(work.owner, weights=out, minlength=work.n_queries)
