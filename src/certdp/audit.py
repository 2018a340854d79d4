"""Exact verification of metric-DP mechanisms, and the audit of a mechanism file.

The contract: for every neighbouring pair (i, j), in both directions, and every output k::

    matrix[i, k] <= exp(epsilon * d(i, j)) * matrix[j, k]

and every row sums to 1 within 1e-9, entries in [0, 1]. :func:`verify` decides it in float64
where ``exp(epsilon * d)`` is finite, both sides scaled by a power of two out of the subnormal
range (:data:`SCALE`), so a passing inequality's loss ``ln(matrix[i,k] / matrix[j,k])`` is at
most ``epsilon * d + 4.5e-16`` (``exp`` and the product each rounded once); a positive entry
against a zero one is always a violation (whatever the solver or ``inf * 0 = nan`` would
say); where ``exp(epsilon * d)`` overflows it decides in log space, conservatively (a
borderline case counts as a violation). Anybody can re-implement it in a few lines of numpy.

The trust model of a mechanism file
-----------------------------------
A mechanism file *claims*: "this matrix is epsilon-mDP for every pair of these records
within eta of each other under this metric". Everything in the file is the writer's word:
the matrix, epsilon, eta, the metric, the records' coordinates (or distances), the pairs it
lists, the costs, the prior, the metadata.

From the file alone, :func:`audit_file` recomputes what the claim implies and checks it: the
format tag; the kind and dimension of every array (a float array of indices or a complex
matrix is refused, never converted); every pair within eta, recomputed from the file's own
coordinates with the library's one definition (:func:`certdp.space.neighbor_pairs`); that the
pairs the file lists are exactly those (a pair missing, and a listed pair the recomputation
does not find, both fail), with the same distances; exact epsilon-mDP on them; rows, costs
and prior. It also refuses a file that protects no pair (status 'no_pairs'), since any matrix,
even one that releases every record, is "private" for an empty set of pairs.

What the file alone cannot show is that its geometry is the *data's*: a writer can scale the
coordinates, lower eta, raise the distances, change the metric or epsilon, and the file stays
consistent with itself. Only the data's owner can check that, by rebuilding the instance
from the data (``certdp audit FILE --dataset SPEC --epsilon E --eta H``, with the options of
``certdp solve``; in Python ``audit_file(path, space=build_space(...))``): the audit then
fails on any difference in records, distances, metric, eta, epsilon, outputs, costs or prior,
and recomputes the pairs and the losses from the owner's data. The metadata (method,
instance name, seed) is information, never evidence.

:meth:`certdp.mechanism.Mechanism.load` and ``certdp perturb`` use the same audit and refuse
whatever it does not pass. Statuses and the exit status of ``certdp audit``
(:data:`EXIT_STATUS`): 0 passed, 1 failed, 2 unreadable (or a bad option), 3 unverifiable
(a field needed to recompute the pairs is missing), 4 no pairs (``--allow-no-pairs`` accepts
it). The report always gives the number of pairs checked.

The file format
---------------
A mechanism file is an ``.npz`` (no pickle) written by
:meth:`certdp.mechanism.Mechanism.save`; the tag ``scaledp-mechanism/2``, the project's
former name, is read as the same format.

=================== ===========================================================================
``format``          0-d string ``certdp-mechanism/2``
``matrix``          (N, K) real, rows sum to 1 within 1e-9
``epsilon``         real scalar > 0, per unit of distance
``eta``             real scalar > 0 (``inf``: every pair is protected)
``metric``          0-d string: ``euclidean``, ``haversine`` (points are (lat, lon) degrees,
                    distances in km) or ``precomputed``
``points``          (N, dim) real record coordinates (not with ``precomputed``)
``distance_matrix`` (N, N) real record distances (only with ``precomputed``)
``edges``           (E, 2) integer: the protected pairs (i < j), exactly those within eta
                    (optional: the audit recomputes them; when present, any difference fails)
``edge_distance``   (E,) real: their distances (with ``edges``)
``output_records``  (K,) integer record index of each output, or all -1 when outputs are not
                    records (optional)
``cost``, ``prior`` optional (N, K) costs >= 0 and (N,) prior >= 0 summing to 1, for the losses
``metadata``        optional 0-d string holding a JSON object (method, instance, seed, ...)
=================== ===========================================================================
"""

from __future__ import annotations

import math
import zipfile
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import _validate as V
from ._io import input_file, load_json
from .measures import expected_loss, quantile_loss, worst_case_loss
from .space import MIN_ETA, Space, check_distance_matrix, check_points, neighbor_pairs

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
    Z = V.real_array("matrix", matrix, ndim=2)
    eps = V.positive_float("epsilon", epsilon)
    E = V.int_array("edges", edges)
    if E.size == 0:
        E = E.reshape(0, 2)
    if E.ndim != 2 or E.shape[1] != 2:
        raise ValueError(f"edges must be an (E, 2) array of record pairs, got shape {E.shape}")
    d = V.real_array("edge_distance", edge_distance, ndim=1)
    if len(d) != len(E):
        raise ValueError(f"edges ({len(E)}) and edge_distance ({len(d)}) differ in length")
    if len(E) and (E.min() < 0 or E.max() >= Z.shape[0]):
        raise ValueError(f"edges must index rows 0..{Z.shape[0] - 1}")
    if len(d) and (not np.all(np.isfinite(d)) or d.min() < 0):
        raise ValueError("edge_distance must be finite and non-negative")
    return Z, eps, E, d


#: Both sides of every inequality are multiplied by this power of two before the product
#: ``exp(ed) * Y`` is rounded: exact for every entry in [0, 1] (subnormals included), and it
#: lifts every nonzero entry to at least 2^-474, so the product is a normal float64 with a
#: relative rounding of at most 2^-53 (unscaled, ``1.51 * 5e-324`` rounds to ``2 * 5e-324``).
SCALE = 2.0 ** 600


def violated(X: np.ndarray, Y: np.ndarray, ed: np.ndarray) -> np.ndarray:
    """Where ``X > exp(ed) * Y`` (elementwise; ``ed = epsilon * d`` broadcast against X and Y),
    in float64: a positive entry against a zero one is a violation; where ``exp(ed)`` is finite
    the product decides, on both sides scaled by :data:`SCALE` (exact), so a passing
    inequality has ``X / Y <= exp(ed) (1 + 2^-52)^2``: its loss is at most ``ed + 4.5e-16``
    (``exp`` and the product each rounded once); where ``exp(ed)`` overflows the comparison is
    made in log space with a relative margin of 1e-11 on ``ed`` (far above the rounding of the
    logs), so a borderline case counts as a violation."""
    with np.errstate(over="ignore"):
        f = np.exp(ed)
    with np.errstate(invalid="ignore", over="ignore"):
        # an overflowing product exceeds every scaled X (at most SCALE): rightly no violation
        ok = (X * SCALE <= f * (Y * SCALE)) | (X == 0)   # inf * 0 = nan compares False
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
           *, block: int = V.BLOCK) -> VerifyReport:
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
LEGACY_FORMATS = ("scaledp-mechanism/2",)
"""The same format written under the project's former name (read as :data:`FORMAT`)."""
METRICS = ("euclidean", "haversine", "precomputed")
EXIT_STATUS = {"passed": 0, "failed": 1, "unverifiable": 3, "no_pairs": 4}
"""The exit status of ``certdp audit`` for each status of :class:`AuditReport`; 2 is a file
that cannot be read as a mechanism file (:class:`MechanismFileError`) or a bad option."""


class MechanismFileError(ValueError):
    """The file is not a readable mechanism file: missing, truncated, not an .npz, another
    format, or an array of the wrong kind or dimension."""


@dataclass(frozen=True, eq=False)
class MechanismFile:
    """The arrays of a mechanism file, read with numpy alone and checked for their kind and
    dimension (see the module docstring); fields the file lacks are None."""

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


def _scalar(data: Any, key: str, kind: str) -> Any:
    """The 0-d array ``key`` as a float (``kind`` 'float': a real number, NaN and inf kept) or a
    str (``kind`` 'str'), None when absent; ValueError when it is of another kind."""
    if key not in data.files:
        return None
    a = data[key]
    if a.shape != ():
        raise ValueError(f"{key!r} must be a scalar, got shape {a.shape}")
    if kind == "str":
        if a.dtype.kind != "U":
            raise ValueError(f"{key!r} must be a string, got {a.dtype}")
        return str(a)
    return float(V.real_array(repr(key), a))


# (name, kind, dimension) of every array of the format besides the scalars
_ARRAYS = (("matrix", "real", 2), ("points", "real", 2), ("distance_matrix", "real", 2), ("edges", "int", 2),
           ("edge_distance", "real", 1), ("output_records", "int", 1), ("cost", "real", 2), ("prior", "real", 1))


def _arrays(data: Any) -> dict[str, np.ndarray | None]:
    out: dict[str, np.ndarray | None] = {}
    for key, kind, ndim in _ARRAYS:
        if key not in data.files:
            out[key] = None
        elif kind == "int":
            out[key] = V.int_array(repr(key), data[key], ndim=ndim)
        else:
            out[key] = V.real_array(repr(key), data[key], ndim=ndim)
    return out


#: What numpy's reader of a zip member can raise on a damaged one, besides OSError and ValueError.
_DAMAGED = (EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError)


def _check_members(p: Path) -> None:
    """The zip's members, checked before numpy reads any: each an ``.npy`` array (numpy hands
    any other member back as raw bytes), stored or deflated as ``np.savez`` writes them (not
    encrypted), its header's shape no larger than the bytes it holds, and all of them together
    within the memory this process may use (a file of a few KB can declare gigabytes)."""
    total = 0
    with zipfile.ZipFile(p) as zf:
        for info in zf.infolist():
            name = info.filename[:60]
            if not info.filename.endswith(".npy"):
                raise MechanismFileError(f"{p}: member {name!r} is not an .npy array")
            if info.flag_bits & 0x1 or info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise MechanismFileError(f"{p}: member {name!r} is encrypted or compressed in a way np.savez "
                                         "never writes")
            with zf.open(info) as fh:
                version = np.lib.format.read_magic(fh)
                read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                               else np.lib.format.read_array_header_2_0)
                shape, _, dtype = read_header(fh)
            if math.prod(shape) * max(dtype.itemsize, 1) > info.file_size:
                raise MechanismFileError(f"{p}: member {name!r} declares shape {shape} of {dtype}, more than "
                                         f"the {info.file_size} bytes it holds")
            total += info.file_size
    V.fits_in_memory(f"{p}'s arrays ({total:,} bytes once read)", 2.0 * total, "it cannot be audited here")


def read_mechanism_file(path: str | Path) -> MechanismFile:
    """Read a mechanism ``.npz`` without pickle; :class:`MechanismFileError` with a clear
    reason when it cannot be read as one (its format tag names another format, or an array
    is of the wrong kind: a float array of indices, a complex or string matrix...)."""
    try:
        p = input_file(path, "mechanism file")
    except ValueError as exc:
        raise MechanismFileError(str(exc)) from None
    if p.stat().st_size == 0:
        raise MechanismFileError(f"{p} is empty (0 bytes), not a mechanism file")
    try:
        if zipfile.is_zipfile(p):
            _check_members(p)
        data = np.load(p, allow_pickle=False)
    except MechanismFileError:
        raise
    except (OSError, ValueError, *_DAMAGED) as exc:
        raise MechanismFileError(f"{p} is not a readable .npz mechanism file ({type(exc).__name__}: "
                                 f"{str(exc).splitlines()[0][:120] if str(exc) else 'unreadable'})") from None
    if not hasattr(data, "files"):
        raise MechanismFileError(f"{p} holds a single array, not a mechanism file (.npz with named arrays)")
    try:
        with data:
            if "matrix" not in data.files or "epsilon" not in data.files:
                raise MechanismFileError(f"{p} lacks the required arrays 'matrix' and 'epsilon' "
                                         f"(it has {sorted(data.files)})")
            fmt = _scalar(data, "format", "str")
            if fmt is not None and fmt != FORMAT and fmt not in LEGACY_FORMATS:
                raise MechanismFileError(f"{p} is a {fmt[:60]!r} file, not a {FORMAT} mechanism file")
            meta_text = _scalar(data, "metadata", "str")
            arrays = _arrays(data)
            eps, eta = _scalar(data, "epsilon", "float"), _scalar(data, "eta", "float")
            metric = _scalar(data, "metric", "str")
    except MechanismFileError:
        raise
    except (TypeError, ValueError) as exc:
        raise MechanismFileError(f"{p}: {exc}") from None
    except (OSError, *_DAMAGED) as exc:
        raise MechanismFileError(f"{p} is truncated or damaged ({type(exc).__name__})") from None
    try:
        meta = load_json("{}" if meta_text is None else meta_text, f"{p}: 'metadata'", nonfinite=True)
    except ValueError as exc:
        raise MechanismFileError(str(exc)) from None
    if not isinstance(meta, dict):
        raise MechanismFileError(f"{p}: 'metadata' is not a JSON object")
    return MechanismFile(path=str(p), epsilon=eps, eta=eta, metric=metric, metadata=meta,
                         format=None if fmt is None else FORMAT, **arrays)


# --------------------------------------------------------------- what the file claims
def _missing(f: MechanismFile) -> list[str]:
    """Why the file does not carry what is needed to recompute its pairs (unverifiable)."""
    why = []
    if f.format is None:
        why.append(f"it has no 'format' tag (expected {FORMAT!r})")
    if f.eta is None:
        why.append("it does not say which pairs are protected (no 'eta')")
    if f.metric is None or f.metric not in METRICS:
        why.append(f"it has no known 'metric' (got {f.metric!r}; expected one of {', '.join(METRICS)})")
    elif f.metric == "precomputed" and f.distance_matrix is None:
        why.append("its metric is 'precomputed' but it has no 'distance_matrix'")
    elif f.metric != "precomputed" and f.points is None:
        why.append(f"its metric is {f.metric!r} but it has no 'points' (the records' coordinates)")
    return why


def _geometry_problems(f: MechanismFile) -> list[str]:
    """What is wrong with the values of a complete file's geometry and claims."""
    n, k = f.matrix.shape
    problems = []
    if not (f.eta is not None and f.eta > 0):          # inf: every pair
        problems.append(f"its eta must be > 0, got {f.eta!r}")
    elif f.metric != "precomputed" and f.eta < MIN_ETA:
        problems.append(f"its eta must be at least {MIN_ETA:g} with coordinates (the neighbour search squares "
                        f"distances), got {f.eta!r}")
    if f.metric == "precomputed":
        try:
            D = check_distance_matrix(f.distance_matrix)
        except (ValueError, TypeError) as exc:
            problems.append(f"its distance_matrix is invalid: {exc}")
        else:
            if D.shape != (n, n):
                problems.append(f"its distance_matrix is {D.shape}, not ({n}, {n})")
    else:
        try:
            P = check_points(f.points, str(f.metric), "its points")
        except (ValueError, TypeError) as exc:
            problems.append(str(exc))
        else:
            if P.shape[0] != n:
                problems.append(f"its points must be ({n}, dim), got shape {P.shape}")
    out = f.output_records
    if out is not None and not np.all(out == -1):
        if out.shape != (k,) or out.min() < 0 or out.max() >= n or len(np.unique(out)) != k:
            problems.append(f"its output_records must be K={k} distinct record indices in [0, {n - 1}] "
                            "(or all -1 when the outputs are not records)")
    return problems + _loss_problems(f)


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


def file_pairs(f: MechanismFile) -> tuple[np.ndarray, np.ndarray]:
    """The protected pairs recomputed from a complete, valid file's own geometry."""
    pts = None if f.metric == "precomputed" else np.asarray(f.points, dtype=np.float64)
    D = None if f.metric != "precomputed" else check_distance_matrix(f.distance_matrix)
    return neighbor_pairs(float(f.eta), str(f.metric), points=pts, distance_matrix=D)


def pair_list_problems(n: int, stored: tuple[np.ndarray, np.ndarray], pairs: tuple[np.ndarray, np.ndarray],
                       where: str) -> list[str]:
    """How a stored list of pairs (E, 2) with their distances disagrees with ``pairs``, the
    pairs (i < j) recomputed from ``where`` (the file's coordinates, or the owner's data):
    a pair missing, a pair that is not within eta, a pair stored twice or backwards, a
    distance that differs. Shared by the audit and :class:`certdp.mechanism.Mechanism`."""
    SE, Sd = stored
    E, d = pairs
    if SE.shape[1:] != (2,):
        return [f"its stored edges must be an (E, 2) array of record pairs, got shape {SE.shape}"]
    if len(SE) != len(Sd):
        return [f"its stored edges ({len(SE)}) and edge_distance ({len(Sd)}) differ in length"]
    if len(SE) and (SE.min() < 0 or SE.max() >= n or np.any(SE[:, 0] >= SE[:, 1])):
        return [f"its stored edges must be pairs (i, j) of records with 0 <= i < j <= {n - 1}"]
    want = E[:, 0] * n + E[:, 1]
    have = SE[:, 0] * n + SE[:, 1]
    problems = []
    if len(np.unique(have)) != len(have):
        problems.append("its stored edges list a pair twice")
    missing = np.setdiff1d(want, have)
    if missing.size:
        problems.append(f"{missing.size} of the {len(want)} protected pairs (within eta of each other in "
                        f"{where}) are missing from its stored edges")
    extra = np.setdiff1d(have, want)
    if extra.size:
        problems.append(f"{extra.size} of its {len(have)} stored edges are not pairs within eta in {where} "
                        "(the file claims to protect pairs that the recomputation does not find)")
    common, iw, ih = np.intersect1d(want, have, return_indices=True)
    if common.size:
        off = ~(np.abs(Sd[ih] - d[iw]) <= 1e-9 * np.maximum(1.0, np.abs(d[iw])))
        if off.any():
            problems.append(f"{int(off.sum())} stored edge distances differ from the distances in {where} "
                            f"(largest difference {float(np.nanmax(np.abs(Sd[ih] - d[iw]))):.3g})")
    return problems


def _differs(a: np.ndarray | None, b: np.ndarray | None, rtol: float = 0.0) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    if a.shape != b.shape:
        return True
    return not (np.array_equal(a, b) if rtol == 0 else np.allclose(a, b, rtol=rtol, atol=0.0))


def owner_problems(f: MechanismFile, space: Space) -> list[str]:
    """How the file differs from the owner's instance ``space`` (rebuilt from the owner's data):
    records, distances, metric, eta, epsilon, outputs, costs or prior."""
    n, k = f.matrix.shape
    diff = []
    if f.metric != space.metric:
        diff.append(f"metric {f.metric!r} (the owner's is {space.metric!r})")
    if f.eta != space.eta:
        diff.append(f"eta {f.eta!r} (the owner's is {space.eta!r})")
    if f.epsilon != space.epsilon:
        diff.append(f"epsilon {f.epsilon!r} (the owner's is {space.epsilon!r})")
    if (n, k) != (space.n_records, space.n_outputs):
        diff.append(f"{n} records x {k} outputs (the owner's instance has {space.n_records} x {space.n_outputs})")
    elif f.metric == space.metric:
        if space.metric == "precomputed" and _differs(f.distance_matrix, space.distance_matrix):
            diff.append("record distances (its distance_matrix)")
        if space.metric != "precomputed" and _differs(f.points, space.points):
            diff.append("records (its points)")
        out = None if f.output_records is None or np.all(f.output_records == -1) else f.output_records
        if _differs(out, space.output_records):
            diff.append("outputs (its output_records)")
        if f.cost is not None and _differs(f.cost, space.cost, rtol=1e-12):
            diff.append("costs")
        if f.prior is not None and _differs(f.prior, space.prior, rtol=1e-12):
            diff.append("prior")
    if not diff:
        return []
    return [f"it differs from the owner's data ({space.name}) in its " + "; ".join(diff)]


@dataclass(frozen=True)
class AuditReport:
    """Audit of a mechanism file (see :data:`EXIT_STATUS`): 'passed'; 'failed', with the
    problems found; 'unverifiable' (the file does not carry what is needed to check it); or
    'no_pairs' (a valid file that protects no pair, refused unless that was asked for).

    Attributes:
        pairs_checked: the protected pairs recomputed and checked (0 when none could be).
        against: where the pairs were recomputed from: ``"the file's own geometry"`` or
            ``"the owner's data (NAME)"``.
        verify: the exact check on those pairs (None when it could not run).
        expected_loss, worst_case_loss, quantile_loss: from the owner's costs and prior when
            the owner's data was given, else the file's (None without costs).
    """

    path: str
    status: str
    problems: tuple[str, ...]
    n_records: int
    n_outputs: int
    pairs_checked: int
    against: str
    verify: VerifyReport | None
    expected_loss: float | None
    worst_case_loss: float | None
    quantile_loss: float | None
    q: float

    @property
    def passed(self) -> bool:
        """Whether the file passed (status 'passed')."""
        return self.status == "passed"

    @property
    def exit_status(self) -> int:
        """The exit status of ``certdp audit`` for this report (:data:`EXIT_STATUS`)."""
        return EXIT_STATUS[self.status]

    def summary(self) -> str:
        """One line: the file, its status and why."""
        what = {"passed": "passes its audit", "failed": "fails its audit", "unverifiable": "cannot be checked",
                "no_pairs": "protects no pair"}[self.status]
        why = "; ".join(self.problems)
        return f"{self.path} {what} ({self.pairs_checked} pairs checked against {self.against})" + (
            f": {why}" if why else "")

    def as_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dictionary (the ``--json`` output of ``certdp audit``)."""
        d = asdict(self)
        d["problems"] = list(self.problems)
        d["verify"] = None if self.verify is None else self.verify.as_dict()
        for key in ("expected_loss", "worst_case_loss", "quantile_loss"):
            if d[key] is not None and not math.isfinite(d[key]):
                d[key] = None
        return d


def audit_with_pairs(f: MechanismFile, *, q: float = 0.95, space: Space | None = None, allow_no_pairs: bool = False
                     ) -> tuple[AuditReport, tuple[np.ndarray, np.ndarray] | None]:
    """Audit an already read file (see :func:`audit_file`); also return the pairs checked
    (None unless the file passed)."""
    n, k = f.matrix.shape
    against = "the file's own geometry" if space is None else f"the owner's data ({space.name})"
    base = dict(path=f.path, n_records=int(n), n_outputs=int(k), q=q, against=against)
    none = dict(verify=None, expected_loss=None, worst_case_loss=None, quantile_loss=None, pairs_checked=0)
    why = _missing(f)
    if why:
        return AuditReport(status="unverifiable", problems=tuple(why), **none, **base), None
    if not (math.isfinite(f.epsilon) and f.epsilon > 0):
        return AuditReport(status="failed", problems=(f"its epsilon must be finite and > 0, got {f.epsilon!r}",),
                           **none, **base), None
    problems = _geometry_problems(f)
    if space is not None:
        problems += owner_problems(f, space)
    if space is not None and space.n_records == n:
        pairs = space.neighbor_pairs
    elif space is None and not problems:
        pairs = file_pairs(f)
    else:
        return AuditReport(status="failed", problems=tuple(problems), **none, **base), None
    E, d = pairs
    if f.edges is not None or f.edge_distance is not None:
        if f.edges is None or f.edge_distance is None:
            problems.append("it has 'edges' or 'edge_distance' without the other")
        else:
            problems += pair_list_problems(n, (f.edges, f.edge_distance), pairs, against)
    rep = verify(f.matrix, f.epsilon, E, d)
    if not rep.passed:
        problems.insert(0, f"the matrix is not {f.epsilon:g}-mDP on the {len(E)} pairs within eta={f.eta:g}: "
                           f"{rep.violations} violated inequalities, max |row sum - 1| {rep.max_row_error:.3g}, "
                           f"min entry {rep.min_entry:.3g}")
    el = wl = ql = None
    cost, prior = (f.cost, f.prior) if space is None else (space.cost, space.prior)
    if cost is not None and not _loss_problems(f) and cost.shape == (n, k):
        pr = prior if prior is not None else np.full(n, 1.0 / n)
        with np.errstate(over="ignore", invalid="ignore"):      # costs near 1e308 give inf or nan losses, reported as such
            el, wl, ql = (expected_loss(f.matrix, cost, pr), worst_case_loss(f.matrix, cost),
                          quantile_loss(f.matrix, cost, q))
    status = "failed" if problems else ("no_pairs" if len(E) == 0 and not allow_no_pairs else "passed")
    if status == "no_pairs":
        problems = [f"it protects no pair: no two of its {n} records are within eta={f.eta:g} of each other in "
                    f"{against}, so any matrix would pass (audit with --allow-no-pairs if that is intended)"]
    rep_out = AuditReport(status=status, problems=tuple(problems), verify=rep, expected_loss=el, worst_case_loss=wl,
                          quantile_loss=ql, pairs_checked=int(len(E)), **base)
    return rep_out, (pairs if status == "passed" else None)


def audit_file(path: str | Path, *, q: float = 0.95, space: Space | None = None,
               allow_no_pairs: bool = False) -> AuditReport:
    """Audit a mechanism ``.npz`` (see the module docstring for what is checked).

    Without ``space``, from the file alone: every protected pair recomputed from the file's
    coordinates (or distances) and eta, the stored pairs and distances compared with them
    (a pair missing or a pair too many fails), exact epsilon-mDP on them, costs and prior
    valid. With ``space``, the owner's instance rebuilt from the owner's data (e.g.
    ``build_space(parse_dataset(spec), epsilon=..., eta=...)``): the file must also carry the
    owner's records, distances, metric, eta, epsilon, outputs, costs and prior, and the pairs
    come from the owner's data. A file that protects no pair has status 'no_pairs' unless
    ``allow_no_pairs``. Raises :class:`MechanismFileError` when the file cannot be read."""
    q = V.open_unit("q", q, upper_closed=True)
    return audit_with_pairs(read_mechanism_file(path), q=q, space=space, allow_no_pairs=allow_no_pairs)[0]
