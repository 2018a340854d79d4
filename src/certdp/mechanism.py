"""The Mechanism (a certified row-stochastic matrix over records x outputs and what it promises),
its file, and :class:`SolveResult`, the one value every solver returns.

A :class:`Mechanism` can only be constructed from a matrix that passes the exact check of
:func:`certdp.audit.verify` for its epsilon and neighbour pairs; the constructor runs it.
:meth:`Mechanism.certified` first repairs a solver's matrix with :func:`certdp.certify.certify`.
The file (``.npz``, no pickle) is described in :mod:`certdp.audit`: it carries the records'
coordinates (or distances) and eta, so anybody can recompute the protected pairs and audit it;
:meth:`Mechanism.load` refuses a file that fails that audit.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from . import _validate as V
from ._io import atomic_target
from .audit import FORMAT, VerifyReport, audit_with_pairs, read_mechanism_file, verify
from .certify import CertifyReport, certify
from .lp.outcome import SolverLimitError, relative_gap
from .measures import expected_loss, worst_case_loss
from .randomness import RNGLike, sample_rows
from .space import Geometry

if TYPE_CHECKING:
    from .space import Space

log = logging.getLogger(__name__)

__all__ = ["Mechanism", "SampledMechanism", "SolveResult", "SolverLimitError", "UnverifiedMechanismError",
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

    def __init__(self, matrix: np.ndarray, epsilon: float, edges: np.ndarray, edge_distance: np.ndarray,
                 *, geometry: Geometry | None = None, output_records: np.ndarray | None = None,
                 cost: np.ndarray | None = None, prior: np.ndarray | None = None,
                 metadata: dict[str, Any] | None = None) -> None:
        Z = np.array(matrix, dtype=np.float64, copy=True)
        eps = V.positive_float("epsilon", epsilon)
        E = np.asarray(edges, dtype=np.int64).reshape(-1, 2).copy()
        d = np.asarray(edge_distance, dtype=np.float64).reshape(-1).copy()
        rep = verify(Z, eps, E, d)
        if not rep.passed:
            raise UnverifiedMechanismError(
                f"matrix fails exact {eps}-mDP: {rep.violations} violated inequalities, "
                f"max row-sum error {rep.max_row_error:.3g}, min entry {rep.min_entry:.3g}")
        Z.setflags(write=False)
        self._matrix = Z
        self.epsilon = eps
        self.edges = E
        self.edge_distance = d
        self.geometry = geometry
        self.output_records = None if output_records is None else np.asarray(output_records, dtype=np.int64)
        self.cost = None if cost is None else np.asarray(cost, dtype=np.float64)
        self.prior = None if prior is None else np.asarray(prior, dtype=np.float64)
        self.metadata = dict(metadata or {})
        self.verification: VerifyReport = rep
        self._cdf: np.ndarray | None = None

    @classmethod
    def certified(cls, space: "Space", matrix: np.ndarray, **metadata: Any) -> tuple["Mechanism", CertifyReport]:
        """Certify ``matrix`` (a solver's approximately feasible answer) on every neighbouring
        pair of ``space`` and wrap it with the space's costs, prior and outputs. ``metadata``
        (method, options) is stored with the instance's name, eta and the mixing certification
        needed."""
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
        if self._cdf is None:
            self._cdf = np.cumsum(self._matrix, axis=1)
        return self._cdf

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
        """Write the mechanism as ``.npz`` (atomically: a partial file is never left); the
        suffix ``.npz`` is added when missing. Returns the path written."""
        g = self.geometry
        if g is None:
            raise ValueError("this mechanism does not carry the records' coordinates and eta, so a file of it "
                             "could not be audited; build it with Mechanism.certified or pass geometry=")
        arrays: dict[str, np.ndarray] = {
            "format": np.array(FORMAT),
            "matrix": np.asarray(self._matrix),
            "epsilon": np.float64(self.epsilon),
            "eta": np.float64(g.eta),
            "metric": np.array(g.metric),
            "edges": self.edges,
            "edge_distance": self.edge_distance,
            "output_records": (self.output_records if self.output_records is not None
                               else np.full(self.n_outputs, -1, dtype=np.int64)),
            "metadata": np.array(json.dumps(self.metadata, default=_json_default)),
        }
        if g.metric == "precomputed":
            arrays["distance_matrix"] = np.asarray(g.distance_matrix, dtype=np.float64)
        else:
            arrays["points"] = np.asarray(g.points, dtype=np.float64)
        if self.cost is not None:
            arrays["cost"] = self.cost
        if self.prior is not None:
            arrays["prior"] = self.prior
        p = npz_path(path)
        with atomic_target(p, ".npz") as tmp:
            np.savez_compressed(tmp, **arrays)
        return p

    @classmethod
    def load(cls, path: str | Path) -> "Mechanism":
        """Read a mechanism file; refuse it (:class:`UnverifiedMechanismError`) unless it passes
        :func:`certdp.audit.audit_file`: its pairs recomputed from its own coordinates, exact
        mDP on them, valid costs and prior."""
        f = read_mechanism_file(path)
        rep, pairs = audit_with_pairs(f)
        if not rep.passed or pairs is None:
            raise UnverifiedMechanismError(f"{f.path} {'is unverifiable' if rep.status == 'unverifiable' else 'fails its audit'}: "
                                           + "; ".join(rep.problems))
        g = Geometry(float(f.eta), str(f.metric), f.points, f.distance_matrix)  # type: ignore[arg-type]
        return cls(f.matrix, float(f.epsilon), pairs[0], pairs[1], geometry=g, output_records=f.output_records,
                   cost=f.cost, prior=f.prior, metadata=f.metadata)

    def __repr__(self) -> str:
        return (f"Mechanism(N={self.n_records}, K={self.n_outputs}, epsilon={self.epsilon:g}, "
                f"pairs={len(self.edges)}, method={self.metadata.get('method', '?')!r})")


def npz_path(path: str | Path) -> Path:
    """``path`` with the suffix ``.npz`` (added when missing), the name a mechanism is saved under."""
    p = Path(path)
    return p if p.suffix == ".npz" else p.with_name(p.name + ".npz")


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

    epsilon: float
    n_records: int
    n_outputs: int

    def perturb(self, records: np.ndarray | list[int] | int, rng: RNGLike = None) -> np.ndarray:
        """Draw one output index for each record index."""


@dataclass(frozen=True)
class SolveResult:
    """A certified mechanism with what is known about its optimality.

    Attributes:
        mechanism: the certified mechanism (passes the exact audit).
        method: the algorithm that produced it.
        status: 'optimal' (gap within the request), 'time_limit', 'iteration_limit',
            'approximate' (the solver stopped at its own tolerance, e.g. PDLP; ``gap`` is still
            true) or 'heuristic' (no optimality claim, e.g. ExpMech).
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
    status: str
    upper_bound: float
    lower_bound: float | None
    gap: float | None
    iterations: int = 0
    history: tuple[dict[str, Any], ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    objective: str = "expected"
    message: str = ""

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
        if isinstance(self.mechanism, Mechanism):
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
