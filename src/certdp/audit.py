"""Exact verification of metric-DP mechanisms, and the audit of a mechanism file.

The contract: for every neighbouring pair (i, j), in both directions, and every output k::

    matrix[i, k] <= exp(epsilon * d(i, j)) * matrix[j, k]

and every row sums to 1 within 1e-9, entries in [0, 1]. :func:`verify` decides it exactly:
in float64 where ``exp(epsilon * d)`` is finite, with a positive entry against a zero one
always a violation (whatever the solver or ``inf * 0 = nan`` would say), and in log space
where ``exp(epsilon * d)`` overflows, conservatively (a borderline case counts as a
violation). Anybody can re-implement it in a few lines of numpy.

A mechanism file (``.npz``, format ``certdp-mechanism/2``, written by
:meth:`certdp.mechanism.Mechanism.save`) carries what is needed to recompute every protected
pair: the records' coordinates and metric (or their distance matrix) and eta.
:func:`audit_file` recomputes the pairs from those, and fails a file whose stored pairs or
distances disagree with them; a file that does not carry them is *unverifiable*.

=================== ===========================================================================
``format``          0-d string ``certdp-mechanism/2``
``matrix``          (N, K) float64, rows sum to 1 within 1e-9
``epsilon``         scalar float64 > 0, per unit of distance
``eta``             scalar float64 > 0 (``inf``: every pair is protected)
``metric``          0-d string: ``euclidean``, ``haversine`` (points are (lat, lon) degrees,
                    distances in km) or ``precomputed``
``points``          (N, dim) float64 record coordinates (not with ``precomputed``)
``distance_matrix`` (N, N) float64 record distances (only with ``precomputed``)
``edges``           (E, 2) int64 the protected pairs (i < j), as the writer computed them
``edge_distance``   (E,) float64 their distances
``output_records``  (K,) int64 record index of each output, or -1 when outputs are not records
``cost``, ``prior`` optional (N, K) costs >= 0 and (N,) prior >= 0 summing to 1, for the losses
``metadata``        0-d string holding a JSON object (method, instance, seed, ...)
=================== ===========================================================================
"""

from __future__ import annotations

import math
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import _validate as V
from ._io import load_json
from .measures import expected_loss, quantile_loss, worst_case_loss
from .space import check_distance_matrix, neighbor_pairs

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
        """The report as a JSON-ready dictionary."""
        return asdict(self)


def checked_mdp_inputs(matrix: np.ndarray, epsilon: float, edges: np.ndarray, edge_distance: np.ndarray
                       ) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """``matrix`` as a 2-D float array, ``epsilon`` as a float > 0, ``edges`` as an (m, 2) int
    array indexing its rows and ``edge_distance`` as m finite distances >= 0; ValueError
    otherwise (shared by :func:`verify` and :func:`certdp.mechanisms.certify.mdp_envelope`)."""
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


def violated(X: np.ndarray, Y: np.ndarray, ed: np.ndarray) -> np.ndarray:
    """Where ``X > exp(ed) * Y`` (elementwise; ``ed = epsilon * d`` broadcast against X and Y),
    decided exactly: a positive entry against a zero one is a violation; where ``exp(ed)`` is
    finite the float64 product decides; where it overflows the comparison is made in log space
    with a relative margin of 1e-11 on ``ed`` (far above the rounding of the logs), so a
    borderline case counts as a violation."""
    with np.errstate(over="ignore"):
        f = np.exp(ed)
    with np.errstate(invalid="ignore", over="ignore"):
        ok = (X <= f * Y) | (X == 0)                   # inf * 0 = nan compares False
    big = ~np.isfinite(f)
    if np.any(big):
        bigb = np.broadcast_to(big, X.shape)
        Xb, Yb = X[bigb], Y[bigb]
        edb = np.broadcast_to(ed, X.shape)[bigb]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.log(Xb) - np.log(Yb)
        ok[bigb] = (Xb == 0) | ((Yb > 0) & (ratio <= edb * (1.0 - 1e-11)))
    return ~ok


def verify(matrix: np.ndarray, epsilon: float, edges: np.ndarray, edge_distance: np.ndarray,
           *, block: int = 2_000_000) -> VerifyReport:
    """Check exact epsilon-mDP of ``matrix`` on the pairs ``edges`` with distances
    ``edge_distance`` (see the module docstring). Memory is bounded by ``block`` entries."""
    Z, eps, E, d = checked_mdp_inputs(matrix, epsilon, edges, edge_distance)
    n, k = Z.shape
    finite = bool(np.all(np.isfinite(Z)))
    min_entry = float(np.min(Z)) if Z.size else 0.0
    row_err = float(np.max(np.abs(Z.sum(axis=1) - 1.0))) if n else 0.0
    violations = 0
    worst_val = -np.inf
    worst: tuple[int, int, int] | None = None
    max_loss = 0.0
    step = max(1, block // max(k, 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        logZ = np.log(Z) if finite and len(E) else Z     # once per matrix: -inf marks a zero entry
    for s in range(0, len(E) if finite else 0, step):
        a, b = E[s:s + step, 0], E[s:s + step, 1]
        dd = d[s:s + step][:, None]
        ed = eps * dd
        Za, Zb = Z[a], Z[b]
        with np.errstate(invalid="ignore"):
            diff = logZ[a] - logZ[b]                     # ln Z[a,k] - ln Z[b,k]; nan where both are 0
        for X, Y, p, q, ratio in ((Za, Zb, a, b, diff), (Zb, Za, b, a, -diff)):
            bad = violated(X, Y, ed)
            nb = int(np.count_nonzero(bad))
            if nb:
                violations += nb
                excess = np.where(bad, ratio - ed, -np.inf)
                t = int(np.argmax(excess))
                r, c = divmod(t, k)
                if excess[r, c] > worst_val:
                    worst_val = float(excess[r, c])
                    worst = (int(p[r]), int(q[r]), int(c))
            # realised loss per pair: the largest ln X - ln Y over outputs (inf for x > 0 = y; a
            # 0 against a 0 is nan and ignored), divided by the pair's distance
            top = np.fmax.reduce(ratio, axis=1) if k else np.zeros(len(a))
            top = np.where(np.isnan(top), -np.inf, top)
            dr = dd[:, 0]
            with np.errstate(divide="ignore", invalid="ignore"):
                per = np.where(dr > 0, top / dr, np.where(top > 0, np.inf, 0.0))
            if per.size:
                max_loss = max(max_loss, float(np.max(per)))
    passed = (finite and violations == 0 and row_err <= ROW_SUM_TOL and min_entry >= 0.0
              and (not Z.size or float(Z.max()) <= 1.0))
    return VerifyReport(passed=passed, pairs_checked=int(len(E)), inequalities_checked=int(2 * len(E) * k),
                        violations=violations, max_loss_per_distance=max_loss if finite else math.nan,
                        worst_pair=worst, max_row_error=row_err, min_entry=min_entry, epsilon=eps)


# ------------------------------------------------------------------ file audit
FORMAT = "certdp-mechanism/2"
METRICS = ("euclidean", "haversine", "precomputed")


class MechanismFileError(ValueError):
    """The file is not a readable mechanism file (missing, truncated, not an .npz, wrong shapes)."""


@dataclass(frozen=True, eq=False)
class MechanismFile:
    """The arrays of a mechanism file, read with numpy alone (see the module docstring).
    Geometry fields are None when the file does not carry them."""

    path: str
    matrix: np.ndarray
    epsilon: float
    eta: float | None
    metric: str | None
    points: np.ndarray | None
    distance_matrix: np.ndarray | None
    edges: np.ndarray | None
    edge_distance: np.ndarray | None
    output_records: np.ndarray | None
    cost: np.ndarray | None
    prior: np.ndarray | None
    metadata: dict[str, Any]
    format: str | None


def _scalar(data: Any, key: str, kind: type) -> Any:
    if key not in data.files:
        return None
    a = data[key]
    if a.shape != ():
        raise MechanismFileError(f"{key!r} must be a scalar, got shape {a.shape}")
    try:
        return kind(a.item() if kind is not str else str(a))
    except (TypeError, ValueError):
        raise MechanismFileError(f"{key!r} is not a {kind.__name__}: {a!r}") from None


def read_mechanism_file(path: str | Path) -> MechanismFile:
    """Read a mechanism ``.npz`` without pickle; :class:`MechanismFileError` with a clear
    reason when it cannot be read."""
    p = Path(path)
    if not p.is_file():
        raise MechanismFileError(f"mechanism file not found: {p}")
    if p.stat().st_size == 0:
        raise MechanismFileError(f"{p} is empty (0 bytes), not a mechanism file")
    try:
        data = np.load(p, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise MechanismFileError(f"{p} is not a readable .npz mechanism file ({type(exc).__name__}: "
                                 f"{str(exc).splitlines()[0][:120] if str(exc) else 'unreadable'})") from None
    if not hasattr(data, "files"):
        raise MechanismFileError(f"{p} holds a single array, not a mechanism file (.npz with named arrays)")
    try:
        with data:
            if "matrix" not in data.files or "epsilon" not in data.files:
                raise MechanismFileError(f"{p} lacks the required arrays 'matrix' and 'epsilon' "
                                         f"(it has {sorted(data.files)})")
            get = {k: np.asarray(data[k]) for k in data.files if k not in ("metadata", "format", "metric")}
            meta_text = str(data["metadata"]) if "metadata" in data.files else "{}"
            fmt = _scalar(data, "format", str)
            metric = _scalar(data, "metric", str)
            eps = _scalar(data, "epsilon", float)
            eta = _scalar(data, "eta", float)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        if isinstance(exc, MechanismFileError):
            raise
        raise MechanismFileError(f"{p} is truncated or damaged ({type(exc).__name__})") from None
    try:
        meta = load_json(meta_text, f"{p}: 'metadata'", nonfinite=True)
    except ValueError as exc:
        raise MechanismFileError(str(exc)) from None
    if not isinstance(meta, dict):
        raise MechanismFileError(f"{p}: 'metadata' is not a JSON object")
    Z = get["matrix"]
    if Z.ndim != 2 or Z.dtype.kind not in "fiu":
        raise MechanismFileError(f"{p}: 'matrix' must be a 2-D numeric array, got {Z.dtype} of shape {Z.shape}")
    out = get.get("output_records")
    if out is not None and out.size and np.all(out < 0):
        out = None
    return MechanismFile(path=str(p), matrix=Z.astype(np.float64), epsilon=eps, eta=eta, metric=metric,
                         points=get.get("points"), distance_matrix=get.get("distance_matrix"), edges=get.get("edges"),
                         edge_distance=get.get("edge_distance"), output_records=out, cost=get.get("cost"),
                         prior=get.get("prior"), metadata=meta, format=fmt)


def file_pairs(f: MechanismFile) -> tuple[tuple[np.ndarray, np.ndarray] | None, list[str]]:
    """The protected pairs recomputed from the file's geometry, or None with the reasons the
    file cannot be checked (no eta, no metric, no coordinates, bad coordinates)."""
    why = []
    n = f.matrix.shape[0]
    if f.eta is None or not (f.eta > 0):
        why.append("it does not say which pairs are protected (no positive 'eta')")
    if f.metric not in METRICS:
        why.append(f"it has no known 'metric' (got {f.metric!r}; expected one of {', '.join(METRICS)})")
    elif f.metric == "precomputed":
        if f.distance_matrix is None:
            why.append("its metric is 'precomputed' but it has no 'distance_matrix'")
        else:
            try:
                D = check_distance_matrix(f.distance_matrix)
            except (ValueError, TypeError) as exc:
                why.append(f"its distance_matrix is invalid: {exc}")
            else:
                if D.shape != (n, n):
                    why.append(f"its distance_matrix is {D.shape}, not ({n}, {n})")
    elif f.points is None:
        why.append(f"its metric is {f.metric!r} but it has no 'points' (the records' coordinates)")
    elif f.points.ndim != 2 or f.points.shape[0] != n or not np.all(np.isfinite(f.points)):
        why.append(f"its points must be ({n}, dim) and finite, got shape {f.points.shape}")
    elif f.metric == "haversine" and (f.points.shape[1] != 2 or np.any(np.abs(f.points[:, 0]) > 90)
                                      or np.any(np.abs(f.points[:, 1]) > 180)):
        why.append("its haversine points must be (lat, lon) in degrees")
    if why:
        return None, why
    pts = None if f.metric == "precomputed" else np.asarray(f.points, dtype=np.float64)
    D = None if f.metric != "precomputed" else check_distance_matrix(f.distance_matrix)
    return neighbor_pairs(float(f.eta), str(f.metric), points=pts, distance_matrix=D), []


def _stored_pairs_problems(f: MechanismFile, E: np.ndarray, d: np.ndarray) -> list[str]:
    """How the pairs stored in the file disagree with the recomputed ones."""
    if f.edges is None or f.edge_distance is None:
        return []
    try:
        SE = np.asarray(f.edges, dtype=np.int64).reshape(-1, 2)
        Sd = np.asarray(f.edge_distance, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        return ["its stored 'edges' / 'edge_distance' are not numeric arrays"]
    if len(SE) != len(Sd):
        return [f"its stored edges ({len(SE)}) and edge_distance ({len(Sd)}) differ in length"]
    n = f.matrix.shape[0]
    key = lambda a, b: np.minimum(a, b) * n + np.maximum(a, b)   # noqa: E731
    want = key(E[:, 0], E[:, 1])
    have = key(SE[:, 0], SE[:, 1]) if len(SE) else np.zeros(0, dtype=np.int64)
    problems = []
    missing = np.setdiff1d(want, have)
    if missing.size:
        problems.append(f"{missing.size} of the {len(want)} protected pairs (within eta of each other in the "
                        "file's own coordinates) are missing from its stored edges")
    common, iw, ih = np.intersect1d(want, have, return_indices=True)
    if common.size:
        off = np.abs(Sd[ih] - d[iw]) > 1e-9 * np.maximum(1.0, np.abs(d[iw]))
        if off.any():
            problems.append(f"{int(off.sum())} stored edge distances differ from the distances of the file's own "
                            f"coordinates (largest difference {float(np.max(np.abs(Sd[ih] - d[iw]))):.3g})")
    return problems


def _loss_problems(f: MechanismFile) -> list[str]:
    n, k = f.matrix.shape
    problems = []
    if f.cost is not None:
        c = f.cost
        if c.shape != (n, k):
            problems.append(f"its cost is {c.shape}, not ({n}, {k})")
        elif not np.all(np.isfinite(c)) or np.any(c < 0):
            problems.append("its cost has NaN, infinite or negative entries")
    if f.prior is not None:
        pr = f.prior
        if pr.shape != (n,):
            problems.append(f"its prior has shape {pr.shape}, not ({n},)")
        elif not np.all(np.isfinite(pr)) or np.any(pr < 0) or abs(float(pr.sum()) - 1.0) > 1e-9:
            problems.append("its prior is not a probability vector (negative, non-finite, or not summing to 1)")
    return problems


@dataclass(frozen=True)
class AuditReport:
    """Audit of a mechanism file: 'passed', 'failed' (with the problems found) or
    'unverifiable' (the file does not carry what is needed to check it), the exact check on
    the recomputed pairs, and the losses when the file holds valid costs."""

    path: str
    status: str
    problems: tuple[str, ...]
    n_records: int
    n_outputs: int
    verify: VerifyReport | None
    expected_loss: float | None
    worst_case_loss: float | None
    quantile_loss: float | None
    q: float

    @property
    def passed(self) -> bool:
        """Whether the file passed (status 'passed')."""
        return self.status == "passed"

    def as_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dictionary (the ``--json`` output of ``certdp audit``)."""
        d = asdict(self)
        d["problems"] = list(self.problems)
        d["verify"] = None if self.verify is None else self.verify.as_dict()
        for key in ("expected_loss", "worst_case_loss", "quantile_loss"):
            if d[key] is not None and not math.isfinite(d[key]):
                d[key] = None
        return d


def audit_with_pairs(f: MechanismFile, *, q: float = 0.95
                     ) -> tuple[AuditReport, tuple[np.ndarray, np.ndarray] | None]:
    """Audit an already read file (see :func:`audit_file`); also return the recomputed pairs
    (None when the file is unverifiable)."""
    n, k = f.matrix.shape
    base = dict(path=f.path, n_records=int(n), n_outputs=int(k), q=q)
    if f.epsilon is None or not (math.isfinite(f.epsilon) and f.epsilon > 0):
        return AuditReport(status="failed", problems=(f"its epsilon must be finite and > 0, got {f.epsilon!r}",),
                           verify=None, expected_loss=None, worst_case_loss=None, quantile_loss=None, **base), None
    pairs, why = file_pairs(f)
    if pairs is None:
        return AuditReport(status="unverifiable", problems=tuple(why), verify=None, expected_loss=None,
                           worst_case_loss=None, quantile_loss=None, **base), None
    E, d = pairs
    problems = _stored_pairs_problems(f, E, d) + _loss_problems(f)
    rep = verify(f.matrix, f.epsilon, E, d)
    if not rep.passed:
        problems.insert(0, f"the matrix is not {f.epsilon:g}-mDP on the {len(E)} pairs within eta={f.eta:g}: "
                           f"{rep.violations} violated inequalities, max |row sum - 1| {rep.max_row_error:.3g}, "
                           f"min entry {rep.min_entry:.3g}")
    el = wl = ql = None
    if f.cost is not None and not _loss_problems(f):
        pr = f.prior if f.prior is not None else np.full(n, 1.0 / n)
        el, wl, ql = expected_loss(f.matrix, f.cost, pr), worst_case_loss(f.matrix, f.cost), quantile_loss(f.matrix, f.cost, q)
    return AuditReport(status="failed" if problems else "passed", problems=tuple(problems), verify=rep,
                       expected_loss=el, worst_case_loss=wl, quantile_loss=ql, **base), pairs


def audit_file(path: str | Path, *, q: float = 0.95) -> AuditReport:
    """Audit a mechanism ``.npz`` with nothing but numpy and the file itself: recompute every
    protected pair from the file's coordinates (or distances) and eta, check that the stored
    pairs and distances agree, check exact epsilon-mDP on the recomputed pairs, and check the
    costs and prior. Raises :class:`MechanismFileError` when the file cannot be read."""
    q = V.open_unit("q", q, upper_closed=True)
    return audit_with_pairs(read_mechanism_file(path), q=q)[0]
