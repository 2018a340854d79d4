"""The Mechanism (a certified row-stochastic matrix over records x outputs and what it promises),
its file, and :class:`SolveResult`, the one value every solver returns.

A :class:`Mechanism` can only be constructed from a matrix that passes the exact check of
:func:`certdp.audit.verify` for its epsilon and neighbour pairs (and, when it carries its
geometry, pairs that are exactly those the geometry gives); the constructor runs it, and
nothing can be changed afterwards: its fields cannot be reassigned and its arrays are
read-only, so what it saves is what was certified.
:meth:`Mechanism.certified` first repairs a solver's matrix with :func:`certdp.certify.certify`.
The file (``.npz``, no pickle) and the trust model of its audit are described in
:mod:`certdp.audit`; :meth:`Mechanism.load` runs that audit and refuses whatever it does not
pass.
"""

from __future__ import annotations

import copy
import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping, Protocol

import numpy as np

from . import _validate as V
from ._io import output_path, write_npz
from .audit import (FORMAT, MechanismFile, VerifyReport, audit_with_pairs, pair_list_problems, read_mechanism_file,
                    verify)
from .certify import CertifyReport, certify
from .lp.outcome import SolverLimitError, Status, relative_gap
from .measures import expected_loss, worst_case_loss
from .randomness import RNGLike, sample_rows
from .space import Geometry

if TYPE_CHECKING:
    from .space import Space

log = logging.getLogger(__name__)

__all__ = ["Mechanism", "SampledMechanism", "SolveResult", "SolverLimitError", "Status", "UnverifiedMechanismError",
           "relative_gap"]


class UnverifiedMechanismError(ValueError):
    """The matrix does not satisfy the promised epsilon-mDP exactly."""


class Mechanism:
    """A certified epsilon-mDP perturbation mechanism.

    Args:
        matrix: (N, K) row-stochastic matrix, ``matrix[i, k] = Pr[output k | record i]``.
        epsilon: privacy budget per unit distance.
        edges: (E, 2) neighbouring record pairs covered by the guarantee.
        edge_distance: (E,) their distances.
        geometry: the eta, metric and coordinates the pairs come from (needed to save the
            mechanism: the file must let anybody recompute the pairs).
        output_records: optional (K,) record index of each output.
        cost: optional (N, K) costs, stored for loss audits.
        prior: optional (N,) prior, stored for loss audits.
        metadata: JSON-serialisable facts (method, instance, seed, solver statistics).

    Raises:
        UnverifiedMechanismError: if the exact check fails.
    """

    __slots__ = ("_matrix", "epsilon", "edges", "edge_distance", "geometry", "output_records", "cost",
                 "prior", "metadata", "verification", "_cdf")
    _matrix: np.ndarray
    epsilon: float
    edges: np.ndarray
    edge_distance: np.ndarray
    geometry: Geometry | None
    output_records: np.ndarray | None
    cost: np.ndarray | None
    prior: np.ndarray | None
    metadata: Mapping[str, Any]
    verification: VerifyReport
    _cdf: np.ndarray | None

    def __init__(self, matrix: np.ndarray, epsilon: float, edges: np.ndarray, edge_distance: np.ndarray,
                 *, geometry: Geometry | None = None, output_records: np.ndarray | None = None,
                 cost: np.ndarray | None = None, prior: np.ndarray | None = None,
                 metadata: Mapping[str, Any] | None = None) -> None:
        self._certify(matrix, epsilon, edges, edge_distance, geometry, output_records, cost, prior, metadata, None)

    def _certify(self, matrix: Any, epsilon: Any, edges: Any, edge_distance: Any, geometry: Geometry | None,
                 output_records: Any, cost: Any, prior: Any, metadata: Mapping[str, Any] | None,
                 audited: VerifyReport | None) -> None:
        """Check and freeze every field; ``audited``: the passed exact check that
        :meth:`load`'s audit already ran on these very arrays and pairs (else it runs here)."""
        Z = _read_only(V.real_array("matrix", matrix, ndim=2))
        eps = V.positive_float("epsilon", epsilon)
        n, k = Z.shape
        E = _read_only(V.int_array("edges", edges).reshape(-1, 2))
        d = _read_only(V.real_array("edge_distance", edge_distance, ndim=1))
        if output_records is not None:
            output_records = _read_only(V.int_array("output_records", output_records, ndim=1, lo=0, hi=n - 1))
            if output_records.shape != (k,):
                raise ValueError(f"output_records must have K={k} entries, got shape {output_records.shape}")
        if cost is not None:
            cost = _read_only(V.finite_array("cost", cost, ndim=2, nonneg=True))
            if cost.shape != (n, k):
                raise ValueError(f"cost must be ({n}, {k}), got shape {cost.shape}")
        if prior is not None:
            prior = _read_only(V.finite_array("prior", prior, ndim=1, nonneg=True))
            if prior.shape != (n,):
                raise ValueError(f"prior must have one entry per record ({n}), got shape {prior.shape}")
        rep = audited if audited is not None else verify(Z, eps, E, d)
        if not rep.passed:
            raise UnverifiedMechanismError(
                f"matrix fails exact {eps}-mDP: {rep.violations} violated inequalities, "
                f"max row-sum error {rep.max_row_error:.3g}, min entry {rep.min_entry:.3g}")
        if geometry is not None and audited is None:
            problems = pair_list_problems(n, (E, d), geometry.pairs(), "its geometry")
            if problems:
                raise UnverifiedMechanismError("the pairs do not match the geometry: " + "; ".join(problems))
        for name, value in (("_matrix", Z), ("epsilon", eps), ("edges", E), ("edge_distance", d),
                            ("geometry", geometry), ("output_records", output_records), ("cost", cost),
                            ("prior", prior), ("metadata", MappingProxyType(copy.deepcopy(dict(metadata or {})))),
                            ("verification", rep), ("_cdf", None)):
            object.__setattr__(self, name, value)

    def with_metadata(self, **extra: Any) -> "Mechanism":
        """The same certified mechanism with ``extra`` added to its metadata. Metadata is
        information, not part of the guarantee, so the certified arrays are shared as they are."""
        new = type(self).__new__(type(self))
        for name in self.__slots__:
            object.__setattr__(new, name, getattr(self, name))
        object.__setattr__(new, "metadata", MappingProxyType(copy.deepcopy({**self.metadata, **extra})))
        return new

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a Mechanism cannot be changed after it is certified (setting {name!r}); "
                             "build a new one, which is certified again")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"a Mechanism cannot be changed after it is certified (deleting {name!r})")

    @classmethod
    def certified(cls, space: "Space | Geometry", matrix: np.ndarray, *, epsilon: float | None = None,
                  **metadata: Any) -> tuple["Mechanism", CertifyReport]:
        """The one way a solver's matrix becomes a Mechanism: certify ``matrix`` (an
        approximately feasible answer) on every neighbouring pair and wrap it.

        ``space`` is the :class:`~certdp.space.Space` the matrix solves (its epsilon, pairs,
        costs, prior and outputs are used), or, for records that are not a Space (an LR-Geo
        user's LR set), their :class:`~certdp.space.Geometry` with ``epsilon``. ``metadata``
        (method, options) is stored with eta, the instance's name and seed, and the mixing
        certification needed."""
        if isinstance(space, Geometry):
            if epsilon is None:
                raise TypeError("Mechanism.certified on a Geometry needs epsilon=")
            edges, dist = space.pairs()
            Zc, cert = certify(matrix, epsilon, edges, dist)
            meta = {**metadata, "eta": space.eta, "certify_mixing": cert.mixing}
            return cls(Zc, epsilon, edges, dist, geometry=space, metadata=meta), cert
        if epsilon is not None:
            raise TypeError("Mechanism.certified on a Space takes its epsilon from the space")
        edges, dist = space.neighbor_pairs
        Zc, cert = certify(matrix, space.epsilon, edges, dist)
        log.debug("certified a %d x %d matrix on %d pairs: mixing %.3g, %d round(s)", Zc.shape[0], Zc.shape[1],
                  len(edges), cert.mixing, cert.rounds)
        meta = {**metadata, "eta": space.eta, "instance": space.name, "seed": space.seed,
                "certify_mixing": cert.mixing}
        mech = cls(Zc, space.epsilon, edges, dist, geometry=space.geometry, output_records=space.output_records,
                   cost=space.cost, prior=space.prior, metadata=meta)
        return mech, cert

    # ------------------------------------------------------------------ facts
    @property
    def matrix(self) -> np.ndarray:
        """The (read-only) perturbation matrix."""
        return self._matrix

    @property
    def n_records(self) -> int:
        """The number of records N."""
        return int(self._matrix.shape[0])

    @property
    def n_outputs(self) -> int:
        """The number of outputs K."""
        return int(self._matrix.shape[1])

    @property
    def output_points(self) -> np.ndarray | None:
        """(K, dim) coordinates of the outputs when they are records with coordinates
        (``geometry.points[output_records]``), else None: what an output index means as a place."""
        g = self.geometry
        if g is None or g.points is None or self.output_records is None or np.any(self.output_records < 0):
            return None
        return g.points[self.output_records]

    def expected_loss(self, cost: np.ndarray | None = None, prior: np.ndarray | None = None) -> float:
        """Expected loss under ``cost`` and ``prior`` (defaults: the stored ones)."""
        c = self.cost if cost is None else cost
        p = self.prior if prior is None else prior
        if c is None:
            raise ValueError("no cost matrix given and none stored with the mechanism")
        if p is None:
            p = np.full(self.n_records, 1.0 / self.n_records)
        return expected_loss(self._matrix, c, p)

    # --------------------------------------------------------------- sampling
    def _cdfs(self) -> np.ndarray:
        cdf = self._cdf
        if cdf is None:
            cdf = _read_only(np.cumsum(self._matrix, axis=1))
            object.__setattr__(self, "_cdf", cdf)
        return cdf

    def perturb(self, records: np.ndarray | list[int] | int, rng: RNGLike = None) -> np.ndarray:
        """Draw one output index for each record index in ``records``.

        ``rng=None`` uses the operating system's secure generator; pass an int or a numpy
        Generator for a reproducible run.
        """
        r = np.atleast_1d(np.asarray(records))
        if r.dtype.kind not in "iu":
            raise TypeError(f"records must be integer indices, got dtype {r.dtype}")
        if r.size and (r.min() < 0 or r.max() >= self.n_records):
            raise ValueError(f"records must be in [0, {self.n_records - 1}]")
        if r.size == 0:
            return np.empty(0, dtype=np.int64)
        cdf = self._cdfs()[r]
        return _draw(cdf, self._matrix[r], rng)

    def sample(self, record: int, size: int = 1, rng: RNGLike = None) -> np.ndarray:
        """Draw ``size`` independent outputs for one record."""
        V.int_in_range("record", record, 0, self.n_records - 1)
        V.int_in_range("size", size, 0)
        return self.perturb(np.full(size, record, dtype=np.int64), rng)

    # ---------------------------------------------------------------- storage
    def save(self, path: str | Path) -> Path:
        """Write the mechanism as ``.npz`` to ``path`` (the suffix ``.npz`` added when missing;
        the rule of :func:`certdp._io.output_path`), atomically: a partial file is never left.
        Returns the path written."""
        g = self.geometry
        if g is None:
            raise ValueError("this mechanism does not carry the records' coordinates and eta, so a file of it "
                             "could not be audited; build it with Mechanism.certified or pass geometry=")
        arrays: dict[str, Any] = {
            "format": np.array(FORMAT),
            "matrix": self._matrix,
            "epsilon": np.float64(self.epsilon),
            "eta": np.float64(g.eta),
            "metric": np.array(g.metric),
            "edges": self.edges,
            "edge_distance": self.edge_distance,
            "output_records": (self.output_records if self.output_records is not None
                               else np.full(self.n_outputs, -1, dtype=np.int64)),
            "metadata": np.array(json.dumps(dict(self.metadata), default=_json_default)),
        }
        if g.metric == "precomputed":
            arrays["distance_matrix"] = g.distance_matrix
        else:
            arrays["points"] = g.points
        if self.cost is not None:
            arrays["cost"] = self.cost
        if self.prior is not None:
            arrays["prior"] = self.prior
        return write_npz(output_path(path, ".npz", what="mechanism file"), arrays)

    @classmethod
    def load(cls, path: "str | Path | MechanismFile", *, space: "Space | None" = None,
             allow_no_pairs: bool = False) -> "Mechanism":
        """Read a mechanism file (or take one already read); refuse it
        (:class:`UnverifiedMechanismError`) unless it passes :func:`certdp.audit.audit_file`
        with the same ``space`` (the owner's instance, to check the file against the owner's
        data) and ``allow_no_pairs``."""
        f = path if isinstance(path, MechanismFile) else read_mechanism_file(path)
        rep, pairs = audit_with_pairs(f, space=space, allow_no_pairs=allow_no_pairs)
        if pairs is None:
            raise UnverifiedMechanismError(rep.summary())
        g = Geometry(float(f.eta), str(f.metric), f.points, f.distance_matrix)  # type: ignore[arg-type]
        out = None if f.output_records is None or np.all(f.output_records == -1) else f.output_records
        mech = cls.__new__(cls)
        mech._certify(f.matrix, f.epsilon, pairs[0], pairs[1], g, out, f.cost, f.prior, f.metadata, rep.verify)
        return mech

    def __repr__(self) -> str:
        return (f"Mechanism(N={self.n_records}, K={self.n_outputs}, epsilon={self.epsilon:g}, "
                f"pairs={len(self.edges)}, method={self.metadata.get('method', '?')!r})")


def _read_only(a: np.ndarray) -> np.ndarray:
    """A read-only copy of ``a`` (a view of a caller's array could still change through it)."""
    b = np.array(a, copy=True)
    b.setflags(write=False)
    return b


def _draw(cdf: np.ndarray, probs: np.ndarray, rng: RNGLike) -> np.ndarray:
    """Inverse-CDF draw per row; never returns an output of probability 0."""
    idx = sample_rows(cdf, rng)
    bad = probs[np.arange(len(idx)), idx] <= 0
    if np.any(bad):  # only possible when u rounds onto the very top of the CDF
        last_pos = probs.shape[1] - 1 - np.argmax(probs[:, ::-1] > 0, axis=1)
        idx = np.where(bad, last_pos, idx)
    return idx.astype(np.int64)


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


class SampledMechanism(Protocol):
    """A mechanism without a closed-form matrix (Madlib, planar Laplace): it can only be sampled;
    its losses are estimates (see :mod:`certdp.family.additive`)."""

    @property
    def epsilon(self) -> float:
        """The privacy budget per unit distance."""
        ...

    @property
    def n_records(self) -> int:
        """The number of records (rows)."""
        ...

    @property
    def n_outputs(self) -> int:
        """The number of outputs."""
        ...

    def perturb(self, records: np.ndarray | list[int] | int, rng: RNGLike = None) -> np.ndarray:
        """Draw one output index for each record index."""


@dataclass(frozen=True)
class SolveResult:
    """A certified mechanism with what is known about its optimality.

    Attributes:
        mechanism: the certified mechanism (passes the exact audit).
        method: the algorithm that produced it.
        status: how the run ended, a :class:`~certdp.lp.outcome.Status`; its table says which
            statuses carry a certified matrix and which a rigorous lower bound.
        upper_bound: the objective of ``mechanism`` itself (expected loss, or the worst-case
            loss max_w L(M, w) when ``objective == 'worst'``).
        lower_bound: a valid lower bound on the optimal objective of the problem solved, or
            None when the method gives none.
        gap: (upper - lower) / upper, or None.
        iterations: solver iterations (simplex iterations, Benders rounds).
        history: per-iteration records (Benders), else empty.
        timings: seconds per phase.
        stats: sizes and counters (constraints before/after reduction, non-zeros, ...).
        objective: 'expected' (paper 000, Eq. 4) or 'worst' (paper 002, Eq. 1).
        message: one sentence on how the run ended (the limit hit, a fallback taken).
    """

    mechanism: "Mechanism | SampledMechanism"
    method: str
    status: Status
    upper_bound: float
    lower_bound: float | None
    gap: float | None
    iterations: int = 0
    history: tuple[dict[str, Any], ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    objective: str = "expected"
    message: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.status, Status):
            raise TypeError(f"SolveResult.status must be a certdp.Status, got {self.status!r}")

    @property
    def expected_loss(self) -> float:
        """The mechanism's expected loss (paper 000, Eq. 4)."""
        if self.objective == "expected":
            return self.upper_bound
        if isinstance(self.mechanism, Mechanism):
            return self.mechanism.expected_loss()
        return float(self.stats["expected_loss"])

    @property
    def worst_case_loss(self) -> float:
        """The mechanism's worst-case loss (paper 002, Eq. 1)."""
        if self.objective == "worst":
            return self.upper_bound
        if isinstance(self.mechanism, Mechanism) and self.mechanism.cost is not None:
            return worst_case_loss(self.mechanism.matrix, self.mechanism.cost)
        return float(self.stats["worst_case_loss"])

    def summary(self) -> dict[str, Any]:
        """The ``--json`` summary of the CLI."""
        m = self.mechanism
        out = {
            "method": self.method,
            "status": self.status,
            "n_records": m.n_records,
            "n_outputs": m.n_outputs,
            "epsilon": m.epsilon,
            "objective": self.objective,
            "expected_loss": self.expected_loss,
            "worst_case_loss": (self.worst_case_loss if not isinstance(m, Mechanism) or m.cost is not None
                                else None),
            "lower_bound": self.lower_bound,
            "upper_bound": self.upper_bound,
            "gap": self.gap,
            "iterations": self.iterations,
            "seconds": self.timings.get("total"),
            "constraints_before": self.stats.get("constraints_before"),
            "constraints_after": self.stats.get("constraints_after"),
            "audit_passed": m.verification.passed if isinstance(m, Mechanism) else None,
            "message": self.message,
        }
        for k in ("expected_loss_se", "worst_case_loss_se", "quantile_loss", "quantile_loss_se", "draws"):
            if k in self.stats:
                out[k] = self.stats[k]
        for k, v in list(out.items()):
            if isinstance(v, float) and not math.isfinite(v):
                out[k] = None
        return out
