"""Exact verification of metric-DP mechanisms, and the audit of a mechanism file.

The contract (the ``.npz`` file format of :mod:`scaledp.mechanisms.base`): for every listed
pair (i, j), in both directions, and every output k::

    matrix[i, k] <= exp(epsilon * d) * matrix[j, k]

holds exactly in float64 (no tolerance), and every row sums to 1 within 1e-9. :func:`verify`
checks exactly that; anybody can re-implement it in a few lines of numpy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import _validate as V
from .measures import expected_loss, quantile_loss, worst_case_loss

ROW_SUM_TOL = 1e-9


@dataclass(frozen=True)
class VerifyReport:
    """Result of the exact mDP check.

    Attributes:
        passed: every inequality holds and every row sums to 1 within 1e-9, entries in [0, 1].
        pairs_checked: neighbouring pairs checked (each in both directions, every output).
        inequalities_checked: 2 * pairs * K.
        violations: inequalities that fail.
        max_loss_per_distance: the largest realised privacy loss per unit distance,
            max over pairs, directions and outputs of ln(Z[i,k] / Z[j,k]) / d(i,j); ``inf`` when
            some Z[j,k] = 0 < Z[i,k]; 0 when there are no pairs.
        worst_pair: (i, j, k) of the largest violation, or None.
        max_row_error: max |row sum - 1|.
        min_entry: smallest entry (must be >= 0).
    """

    passed: bool
    pairs_checked: int
    inequalities_checked: int
    violations: int
    max_loss_per_distance: float
    worst_pair: tuple[int, int, int] | None
    max_row_error: float
    min_entry: float
    epsilon: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def checked_mdp_inputs(matrix: np.ndarray, epsilon: float, edges: np.ndarray, edge_distance: np.ndarray
                       ) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """``matrix`` as a 2-D float array, ``epsilon`` as a float > 0, ``edges`` as an (m, 2) int
    array indexing its rows and ``edge_distance`` as m finite distances >= 0; ValueError
    otherwise (shared by :func:`verify` and :func:`scaledp.mechanisms.certify.mdp_envelope`)."""
    Z = np.asarray(matrix, dtype=np.float64)
    if Z.ndim != 2:
        raise ValueError(f"matrix must be 2-D, got shape {Z.shape}")
    eps = V.positive_float("epsilon", epsilon)
    E = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    d = np.asarray(edge_distance, dtype=np.float64).reshape(-1)
    if len(d) != len(E):
        raise ValueError(f"edges ({len(E)}) and edge_distance ({len(d)}) differ in length")
    if len(E) and (E.min() < 0 or E.max() >= Z.shape[0]):
        raise ValueError(f"edges must index rows 0..{Z.shape[0] - 1}")
    if len(d) and (not np.all(np.isfinite(d)) or d.min() < 0):
        raise ValueError("edge_distance must be finite and non-negative")
    return Z, eps, E, d


def verify(matrix: np.ndarray, epsilon: float, edges: np.ndarray, edge_distance: np.ndarray,
           *, block: int = 2_000_000) -> VerifyReport:
    """Check exact epsilon-mDP of ``matrix`` on the pairs ``edges`` with distances
    ``edge_distance`` (see the module docstring). Memory is bounded by ``block`` entries."""
    Z, eps, E, d = checked_mdp_inputs(matrix, epsilon, edges, edge_distance)
    n, k = Z.shape
    finite = bool(np.all(np.isfinite(Z)))
    min_entry = float(Z.min()) if Z.size else 0.0
    row_err = float(np.max(np.abs(Z.sum(axis=1) - 1.0))) if n else 0.0
    violations = 0
    worst_val = 0.0
    worst: tuple[int, int, int] | None = None
    max_loss = 0.0
    step = max(1, block // max(k, 1))
    for s in range(0, len(E), step):
        a, b = E[s:s + step, 0], E[s:s + step, 1]
        f = np.exp(eps * d[s:s + step])[:, None]
        Za, Zb = Z[a], Z[b]
        for X, Y, p, q in ((Za, Zb, a, b), (Zb, Za, b, a)):
            excess = X - f * Y
            bad = excess > 0
            nb = int(np.count_nonzero(bad))
            if nb:
                violations += nb
                t = int(np.argmax(np.where(bad, excess, -np.inf)))
                r, c = divmod(t, k)
                if excess[r, c] > worst_val:
                    worst_val = float(excess[r, c])
                    worst = (int(p[r]), int(q[r]), int(c))
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.log(X) - np.log(Y)
            ratio = np.where((X == 0), -np.inf, ratio)  # 0 vs anything: no loss
            dd = d[s:s + step][:, None]
            with np.errstate(divide="ignore", invalid="ignore"):
                per = np.where(dd > 0, ratio / dd, np.where(ratio > 0, np.inf, 0.0))
            if per.size:
                max_loss = max(max_loss, float(np.max(per)))
    passed = (finite and violations == 0 and row_err <= ROW_SUM_TOL and min_entry >= 0.0
              and (not Z.size or float(Z.max()) <= 1.0))
    return VerifyReport(passed=passed, pairs_checked=int(len(E)), inequalities_checked=int(2 * len(E) * k),
                        violations=violations, max_loss_per_distance=max_loss, worst_pair=worst,
                        max_row_error=row_err, min_entry=min_entry, epsilon=eps)


# ------------------------------------------------------------------ file audit
@dataclass(frozen=True)
class AuditReport:
    """Audit of a mechanism file: the exact check plus losses when the file holds costs."""

    path: str
    n_records: int
    n_outputs: int
    verify: VerifyReport
    expected_loss: float | None
    worst_case_loss: float | None
    quantile_loss: float | None
    q: float

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["verify"] = self.verify.as_dict()
        for key in ("expected_loss", "worst_case_loss", "quantile_loss"):
            if d[key] is not None and not math.isfinite(d[key]):
                d[key] = None
        return d


def audit_file(path: str | Path, *, q: float = 0.95) -> AuditReport:
    """Verify a mechanism ``.npz`` (keys ``matrix``, ``epsilon``, ``edges``, ``edge_distance``;
    optional ``cost`` and ``prior`` for the losses) with nothing but numpy."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"mechanism file not found: {p}")
    try:
        data = np.load(p, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{p} is not a readable .npz file: {exc}") from None
    with data:
        missing = [key for key in ("matrix", "epsilon", "edges", "edge_distance") if key not in data.files]
        if missing:
            raise ValueError(f"{p} lacks required arrays {missing}")
        Z = data["matrix"]
        rep = verify(Z, float(data["epsilon"]), data["edges"], data["edge_distance"])
        el = wl = ql = None
        if "cost" in data.files:
            c = data["cost"]
            pr = data["prior"] if "prior" in data.files else np.full(Z.shape[0], 1.0 / Z.shape[0])
            el = expected_loss(Z, c, pr)
            wl = worst_case_loss(Z, c)
            ql = quantile_loss(Z, c, q)
    return AuditReport(path=str(p), n_records=int(Z.shape[0]), n_outputs=int(Z.shape[1]), verify=rep,
                       expected_loss=el, worst_case_loss=wl, quantile_loss=ql, q=q)
