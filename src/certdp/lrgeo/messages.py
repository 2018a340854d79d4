"""Everything that crosses between an LR-Geo user and the server, as JSON dataclasses.

Each message says, next to it, exactly what the server (or the user) learns from it.

Order of the protocol (paper 003, Fig. 4):

1. user -> server   :class:`TableRequest`      the circle C(v_a, R) whose reference table rows it wants
2. server -> user   :class:`TableResponse`     those rows of the cost reference table
3. user -> server   :class:`ObfuscationRequest` the coefficients of its LR-OMG problem
4. server -> user   :class:`ObfuscationResponse` the solved free probabilities and the weights y

A note on what sharing y costs (the issue asks us to state it)
--------------------------------------------------------------
Cross-user Geo-Ind (Theorem 4.4) needs every user's exponential entries z[i, k] = y_k g(d_ik)
to use the *same* y_k for the same global location k, so the ObfuscationRequest names the
global location of every column (``columns``) next to the distances ``D_NO`` from each LR
location to those columns. The locations of V are public, so three columns with their
distances pin every LR row down (trilateration): the server learns the LR set N_m exactly,
and N_m is the Gamma-ball of the user's location in the Geo-Ind graph, whose centre is usually
unique. :func:`certdp.lrgeo.measures.column_inference` measures this; the paper's
own inference metric (reference-table rows consistent with each uploaded cost, section 4.7) is
:func:`certdp.lrgeo.measures.table_inference`. ``LRGeoParams.hide`` is the remedy: the LR set
is centred on a location drawn near the user, so the server learns only that centre. The location the user finally
*reports* is still drawn from a Geo-Ind mechanism; what the protocol leaks is to the server
that computes the matrix, which the paper assumes is not malicious (section 2.1).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from .._io import load_json


class ProtocolError(ValueError):
    """A message failed validation; the receiver's state is unchanged."""


def _arr(name: str, value: Any, ndim: int, *, dtype=np.float64, nonneg: bool = False, allow_nan: bool = False,
         ) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"{name}: not a numeric array ({exc})") from None
    if a.ndim != ndim:
        raise ProtocolError(f"{name}: expected a {ndim}-d array, got shape {a.shape}")
    if dtype is np.float64:
        bad = np.isinf(a) | (np.isnan(a) if not allow_nan else np.zeros(a.shape, dtype=bool))
        if np.any(bad):
            raise ProtocolError(f"{name}: contains NaN or infinite values")
        if nonneg and np.any(a[~np.isnan(a)] < 0):
            raise ProtocolError(f"{name}: contains negative values")
    return a


@dataclass(frozen=True)
class _Message:
    """JSON for the message dataclasses: arrays become lists, NaN becomes null, and a
    ``type`` field names the class; ``from_json`` re-runs the class's validation."""

    def to_json(self) -> str:
        d = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray):
                nan = v.dtype.kind == "f" and bool(np.isnan(v).any())
                v = np.where(np.isnan(v), np.asarray(None), v).tolist() if nan else v.tolist()
            d[f.name] = v
        d["type"] = type(self).__name__
        return json.dumps(d)

    @classmethod
    def from_json(cls, text: str):
        try:
            d = load_json(text, "the message")
        except ValueError as exc:
            raise ProtocolError(str(exc)) from None
        return cls.from_dict(d)

    @classmethod
    def from_dict(cls, d: Any):
        """The message from parsed JSON (validated like :meth:`from_json`)."""
        if isinstance(d, dict):
            d = dict(d)
        if not isinstance(d, dict) or d.pop("type", None) != cls.__name__:
            raise ProtocolError(f"not a {cls.__name__} message")
        names = {f.name for f in fields(cls)}
        if set(d) != names:
            raise ProtocolError(f"{cls.__name__}: expected fields {sorted(names)}, got {sorted(d)}")
        for k, v in d.items():
            if isinstance(v, list):
                try:
                    d[k] = np.asarray(v, dtype=np.float64)       # no null: the fast path
                except (TypeError, ValueError):
                    d[k] = np.asarray(v, dtype=object)
                    d[k] = np.where(d[k] == None, np.nan, d[k])  # noqa: E711 (JSON null is NaN)
        return cls(**d)


@dataclass(frozen=True)
class TableRequest(_Message):
    """user -> server. The server learns: a circle of radius ``radius_km`` around a location
    v_a drawn uniformly from the user's LR set, so the user is within Gamma of v_a."""

    user: str
    center: np.ndarray  # (lat, lon)
    radius_km: float

    def __post_init__(self) -> None:
        c = _arr("center", self.center, 1)
        if c.shape != (2,) or abs(c[0]) > 90 or abs(c[1]) > 180:
            raise ProtocolError(f"center must be (lat, lon) in degrees, got {c.tolist()}")
        r = float(self.radius_km)
        if not (math.isfinite(r) and r > 0):
            raise ProtocolError(f"radius_km must be finite and > 0, got {self.radius_km!r}")
        object.__setattr__(self, "center", c)
        object.__setattr__(self, "radius_km", r)


@dataclass(frozen=True)
class TableResponse(_Message):
    """server -> user. The user learns beta for pairs of fine cells in its circle: expected
    travel-cost differences over the targets, not where the targets are."""

    center: np.ndarray
    radius_km: float
    cell_km: float
    fine_latlon: np.ndarray   # (F, 2) fine cell centres in the circle
    fine_node: np.ndarray     # (F,) their road nodes
    pair_key: np.ndarray      # sorted node-pair keys a * n_nodes + b, a < b
    pair_beta: np.ndarray
    n_nodes: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "center", _arr("center", self.center, 1))
        object.__setattr__(self, "fine_latlon", _arr("fine_latlon", self.fine_latlon, 2))
        object.__setattr__(self, "fine_node", _arr("fine_node", self.fine_node, 1, dtype=np.int64))
        object.__setattr__(self, "pair_key", _arr("pair_key", self.pair_key, 1, dtype=np.int64))
        object.__setattr__(self, "pair_beta", _arr("pair_beta", self.pair_beta, 1, nonneg=True))
        if len(self.pair_key) != len(self.pair_beta) or len(self.fine_node) != len(self.fine_latlon):
            raise ProtocolError("TableResponse: array lengths disagree")


@dataclass(frozen=True)
class ObfuscationRequest(_Message):
    """user -> server: the coefficients of the user's LR-OMG problem (Eq. 15-19).

    The server learns: |N_m| (rows, in a random order), the Haversine distances among the LR
    locations ``D_NN`` (on a regular grid the same for every user, section 4.2), the global
    location of every obfuscation column ``columns`` with the distances ``D_NO`` from each LR
    location to it (needed to share y; see the module docstring for what this reveals), and
    the upper-bound costs ``C_NO`` (Eq. 27; NaN where d > r_obf: the server then uses its own
    bound for that entry). ``p`` are the row weights of the user's objective.
    """

    user: str
    D_NN: np.ndarray
    columns: np.ndarray
    D_NO: np.ndarray
    C_NO: np.ndarray
    p: np.ndarray

    def __post_init__(self) -> None:
        D = _arr("D_NN", self.D_NN, 2, nonneg=True)
        n = D.shape[0]
        if D.shape != (n, n):
            raise ProtocolError(f"D_NN must be square, got shape {D.shape}")
        if n < 2:
            raise ProtocolError("D_NN: the LR set must have at least two locations")
        if not np.allclose(D, D.T, rtol=0, atol=1e-12):
            raise ProtocolError("D_NN is not symmetric")
        if np.any(np.diag(D) != 0):
            raise ProtocolError("D_NN must have a zero diagonal")
        cols = _arr("columns", self.columns, 1, dtype=np.int64)
        if len(np.unique(cols)) != len(cols) or len(cols) == 0 or cols.min() < 0:
            raise ProtocolError("columns must be distinct non-negative location indices")
        DO = _arr("D_NO", self.D_NO, 2, nonneg=True)
        C = _arr("C_NO", self.C_NO, 2, nonneg=True, allow_nan=True)
        if DO.shape != (n, len(cols)) or C.shape != DO.shape:
            raise ProtocolError(f"D_NO and C_NO must be ({n}, {len(cols)}), got {DO.shape} and {C.shape}")
        p = _arr("p", self.p, 1, nonneg=True)
        if p.shape != (n,) or abs(p.sum() - 1.0) > 1e-9:
            raise ProtocolError("p must have one non-negative weight per LR row, summing to 1")
        for k, v in (("D_NN", D), ("columns", cols), ("D_NO", DO), ("C_NO", C), ("p", p)):
            object.__setattr__(self, k, v)

    @property
    def n(self) -> int:
        return int(self.D_NN.shape[0])


@dataclass(frozen=True)
class ObfuscationResponse(_Message):
    """server -> user: the LP values the user needs to assemble its LR matrix: the free
    probabilities ``free`` (NaN where the entry follows the exponential mechanism) and the
    weights y' (one per global location; z[i, k] = y'_k h_ik for exponential entries).
    The user learns y', which depends on the other users' requests only through the LP."""

    user: str
    free: np.ndarray   # (n, o)
    y: np.ndarray      # (K,)
    status: str
    upper_bound: float
    lower_bound: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "free", _arr("free", self.free, 2, allow_nan=True))
        object.__setattr__(self, "y", _arr("y", self.y, 1))
