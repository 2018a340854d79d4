"""Everything that crosses between an LR-Geo user and the server: four pydantic models.

Each message says, next to it, exactly what the server (or the user) learns from it. The
models are the protocol's one definition: the in-process round (:mod:`certdp.lrgeo.protocol`),
the HTTP service (whose OpenAPI schema they become) and the clients, Python and the browser
page, all read and write them.

Order of the protocol (paper 003, Fig. 4):

1. user -> server   :class:`TableRequest`      the circle C(v_a, R) whose reference table rows it wants
2. server -> user   :class:`TableResponse`     those rows of the cost reference table
3. user -> server   :class:`ObfuscationRequest` the coefficients of its LR-OMG problem
4. server -> user   :class:`ObfuscationResponse` the solved free probabilities and the weights y

Validation is strict and bounded: a number is a JSON number (``"1"`` and ``true`` are not), a
column id or road node is an integer (``1.0`` is not), every float is finite and within the
range its meaning allows (distances within half the Earth's circumference, probabilities in
[0, 1], ...), and arrays have the shapes their fields promise. Arrays are numpy arrays in
Python and lists in JSON (``null`` for an entry that is NaN in Python: a cost the user could
not estimate, a probability that follows the exponential mechanism). A message that fails any
check raises :class:`ProtocolError` and nothing is built.

A note on what sharing y costs
------------------------------
Cross-user Geo-Ind (Theorem 4.4) needs every user's exponential entries z[i, k] = y_k g(d_ik)
to use the *same* y_k for the same global location k, so the ObfuscationRequest names the
global location of every column (``columns``) next to the distances ``D_NO`` from each LR
location to those columns. The locations of V are public, so three columns with their
distances pin every LR row down (trilateration): the server learns the LR set N_m exactly,
and N_m is the Gamma-ball of the user's location in the Geo-Ind graph, whose centre is unique
unless the ball covers all of V (at the paper's Gamma = 20 km on a block of K = 100 of 1.2 km
cells, every location is a candidate and the server learns only V). :func:`certdp.lrgeo.measures.column_inference` measures this; the paper's
own inference metric (reference-table rows consistent with each uploaded cost, section 4.7) is
:func:`certdp.lrgeo.measures.table_inference`. ``LRGeoParams.hide`` is the remedy: the LR set
is centred on a location drawn near the user, so the server learns only that centre. The location the user finally
*reports* is still drawn from a Geo-Ind mechanism; what the protocol leaks is to the server
that computes the matrix, which the paper assumes is not malicious (section 2.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import SchemaValidator
from pydantic_core import core_schema as cs

from .._io import load_json
from ..space import EARTH_RADIUS_KM

MAX_KM = math.pi * EARTH_RADIUS_KM
"""The largest great-circle distance (km): half the Earth's circumference."""
MAX_COST_KM = 1e6
"""The largest cost coefficient (km of expected travel) a message may carry; the server holds
each user's costs to a tighter bound of its own (:mod:`certdp.lrgeo.service`)."""
MAX_NODES = 94_906_265
"""The most road nodes a table may index: its pair keys ``a * n_nodes + b`` stay below 2**53,
so a JavaScript client reads them exactly."""
NAME_PATTERN = r"^[A-Za-z0-9_.:-]{1,64}$"


class ProtocolError(ValueError):
    """A message failed validation; the receiver's state is unchanged."""


# ---------------------------------------------------------------------------- arrays
@dataclass(frozen=True)
class Array:
    """A numpy array field: nested JSON lists of strict numbers, bounded and finite (``null``
    allowed where ``nullable``, read as NaN); ``ndim`` levels, the last one ``width`` long when
    given. Python code may pass numpy arrays, which are checked the same way without a copy
    to lists."""

    ndim: int
    integer: bool = False
    ge: float | None = None
    le: float | None = None
    nullable: bool = False
    width: int | None = None

    def _item(self) -> cs.CoreSchema:
        item: cs.CoreSchema
        if self.integer:
            item = cs.int_schema(strict=True, ge=None if self.ge is None else int(self.ge),
                                 le=None if self.le is None else int(self.le))
        else:
            item = cs.float_schema(strict=True, allow_inf_nan=False, ge=self.ge, le=self.le)
        return cs.nullable_schema(item) if self.nullable else item

    def _lists(self) -> cs.CoreSchema:
        s = self._item()
        for level in range(self.ndim):
            w = self.width if level == 0 else None
            s = cs.list_schema(s, strict=True, min_length=w, max_length=w)
        return s

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> cs.CoreSchema:
        lists = self._lists()
        checker = SchemaValidator(lists)

        def from_lists(v: Any) -> np.ndarray:
            return self._array(v)

        def from_python(v: Any) -> np.ndarray:
            if isinstance(v, np.ndarray):
                return self._check(v)
            try:
                return self._array(checker.validate_python(v))
            except ValidationError as exc:
                raise ValueError(_summary(exc)) from None

        return cs.json_or_python_schema(
            json_schema=cs.chain_schema([lists, cs.no_info_plain_validator_function(from_lists)]),
            python_schema=cs.no_info_plain_validator_function(from_python),
            serialization=cs.plain_serializer_function_ser_schema(self._lists_of, when_used="json",
                                                                  return_schema=lists))

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict[str, Any]:
        return handler(self._lists())

    def _array(self, v: Any) -> np.ndarray:
        a = np.array(v, dtype=np.int64 if self.integer else np.float64)   # None -> NaN for floats
        if a.ndim != self.ndim:      # ragged or empty inner lists
            raise ValueError(f"expected a {self.ndim}-d array, got shape {a.shape}")
        return a

    def _check(self, a: np.ndarray) -> np.ndarray:
        if a.dtype.kind == "b" or a.dtype.kind not in ("iu" if self.integer else "iuf"):
            raise ValueError(f"expected an array of {'integers' if self.integer else 'numbers'}, got dtype {a.dtype}")
        a = a.astype(np.int64 if self.integer else np.float64, copy=False)
        if a.ndim != self.ndim or (self.width is not None and a.shape[-1] != self.width):
            raise ValueError(f"expected a {self.ndim}-d array{'' if self.width is None else f' of width {self.width}'}"
                             f", got shape {a.shape}")
        vals = a
        if not self.integer:
            nan = np.isnan(a)
            if nan.any() and not self.nullable:
                raise ValueError("contains NaN")
            if np.isinf(a).any():
                raise ValueError("contains an infinite value")
            vals = a[~nan] if nan.any() else a
        low = self.ge is not None and vals.size and vals.min() < self.ge
        high = self.le is not None and vals.size and vals.max() > self.le
        if low or high:
            raise ValueError(f"values must be in [{self.ge}, {self.le}]")
        return a

    def _lists_of(self, a: np.ndarray) -> list:
        if not self.integer and self.nullable and np.isnan(a).any():
            return np.where(np.isnan(a), np.asarray(None), a).tolist()
        return a.tolist()


def _summary(exc: ValidationError, most: int = 3) -> str:
    """One line from a pydantic error: where and what, for the first ``most`` problems."""
    errs = exc.errors(include_url=False, include_input=False)
    parts = [f"{'.'.join(str(p) for p in e['loc']) or 'message'}: {e['msg'].removeprefix('Value error, ')}"
             for e in errs[:most]]
    more = f" (and {len(errs) - most} more)" if len(errs) > most else ""
    return "; ".join(parts) + more


LatLon = Annotated[np.ndarray, Array(1, width=2, ge=-180, le=180)]
LatLons = Annotated[np.ndarray, Array(2, width=2, ge=-180, le=180)]
Nodes = Annotated[np.ndarray, Array(1, integer=True, ge=0, le=MAX_NODES - 1)]
PairKeys = Annotated[np.ndarray, Array(1, integer=True, ge=0, le=MAX_NODES ** 2 - 1)]
Costs = Annotated[np.ndarray, Array(1, ge=0, le=MAX_COST_KM)]
Distances = Annotated[np.ndarray, Array(2, ge=0, le=MAX_KM)]
Columns = Annotated[np.ndarray, Array(1, integer=True, ge=0, le=2 ** 31 - 1)]
CostsOrNull = Annotated[np.ndarray, Array(2, ge=0, le=MAX_COST_KM, nullable=True)]
Weights = Annotated[np.ndarray, Array(1, ge=0, le=1)]
FreeOrNull = Annotated[np.ndarray, Array(2, ge=0, le=2, nullable=True)]
YPrime = Annotated[np.ndarray, Array(1, ge=0, le=2)]


# --------------------------------------------------------------------------- messages
class Message(BaseModel):
    """JSON for the protocol's models: ``to_json``/``from_json``/``from_dict``, each message
    tagged with its ``type``; every failure is a one-line :class:`ProtocolError`."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", allow_inf_nan=False,
                              arbitrary_types_allowed=True)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ProtocolError(f"{type(self).__name__}: {_summary(exc)}") from None

    # pydantic calls a model's own __init__ from model_validate when it has one; this one only
    # translates the error type, so validation goes straight to the schema (and is not run twice)
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    def to_json(self) -> str:
        """The message as JSON text."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes):
        """The message from JSON text, read as certdp reads all JSON from outside
        (:func:`certdp._io.load_json`: UTF-8, depth checked before parsing, no key twice in an
        object, no NaN or Infinity), then validated."""
        try:
            d = load_json(text, cls.__name__)
        except ValueError as exc:
            raise ProtocolError(str(exc)) from None
        return cls.from_dict(d)

    @classmethod
    def from_dict(cls, d: Any):
        """The message from parsed JSON (validated like :meth:`from_json`)."""
        try:
            return cls.model_validate(d)
        except ValidationError as exc:
            raise ProtocolError(f"{cls.__name__}: {_summary(exc)}") from None



class TableRequest(Message):
    """user -> server. The server learns: a circle of radius ``radius_km`` around a location
    v_a drawn uniformly from the user's LR set, so the user is within Gamma of v_a."""

    type: Literal["TableRequest"] = "TableRequest"
    user: str = Field(pattern=NAME_PATTERN, description="ignored by the service, which assigns ids")
    center: LatLon = Field(description="(lat, lon) of v_a, degrees")
    radius_km: float = Field(gt=0, le=MAX_KM)

    @model_validator(mode="after")
    def _latlon(self) -> TableRequest:
        if abs(self.center[0]) > 90 or abs(self.center[1]) > 180:
            raise ValueError(f"center must be (lat, lon) in degrees, got {self.center.tolist()}")
        return self



class TableResponse(Message):
    """server -> user. The user learns beta for pairs of fine cells in its circle: expected
    travel-cost differences over the targets, not where the targets are."""

    type: Literal["TableResponse"] = "TableResponse"
    center: LatLon
    radius_km: float = Field(gt=0, le=MAX_KM)
    cell_km: float = Field(gt=0, le=MAX_KM)
    fine_latlon: LatLons = Field(description="(F, 2) fine cell centres in the circle")
    fine_node: Nodes = Field(description="(F,) their road nodes")
    pair_key: PairKeys = Field(description="sorted node-pair keys a * n_nodes + b, a < b")
    pair_beta: Costs = Field(description="beta of each key, km")
    n_nodes: int = Field(ge=1, le=MAX_NODES)


    @model_validator(mode="after")
    def _consistent(self) -> TableResponse:
        if len(self.pair_key) != len(self.pair_beta) or len(self.fine_node) != len(self.fine_latlon):
            raise ValueError("array lengths disagree")
        if len(self.fine_node) and self.fine_node.max() >= self.n_nodes:
            raise ValueError("fine_node must index the n_nodes road nodes")
        if len(self.pair_key) and self.pair_key.max() >= self.n_nodes ** 2:
            raise ValueError("pair_key must be below n_nodes ** 2")
        return self


class ObfuscationRequest(Message):
    """user -> server: the coefficients of the user's LR-OMG problem (Eq. 15-19).

    The server learns: |N_m| (rows, in a random order), the Haversine distances among the LR
    locations ``D_NN`` (on a regular grid the same for every user, section 4.2), the global
    location of every obfuscation column ``columns`` with the distances ``D_NO`` from each LR
    location to it (needed to share y; see the module docstring for what this reveals), and
    the upper-bound costs ``C_NO`` (Eq. 27; null where d > r_obf: the server then uses its own
    bound for that entry). ``p`` are the row weights of the user's objective.
    """

    type: Literal["ObfuscationRequest"] = "ObfuscationRequest"
    user: str = Field(pattern=NAME_PATTERN, description="the id the server gave with the table")
    D_NN: Distances = Field(description="(n, n) Haversine distances among the LR locations, km")
    columns: Columns = Field(description="(o,) global location ids of the obfuscation range")
    D_NO: Distances = Field(description="(n, o) distances from each LR location to each column, km")
    C_NO: CostsOrNull = Field(description="(n, o) estimated costs, km; null where d > r_obf")
    p: Weights = Field(description="(n,) row weights, summing to 1")


    @model_validator(mode="after")
    def _consistent(self) -> ObfuscationRequest:
        D, cols = self.D_NN, self.columns
        n = D.shape[0]
        if D.shape != (n, n):
            raise ValueError(f"D_NN must be square, got shape {D.shape}")
        if n < 2:
            raise ValueError("D_NN: the LR set must have at least two locations")
        if not np.allclose(D, D.T, rtol=0, atol=1e-12):
            raise ValueError("D_NN is not symmetric")
        if np.any(np.diag(D) != 0):
            raise ValueError("D_NN must have a zero diagonal")
        if len(cols) == 0 or len(np.unique(cols)) != len(cols):
            raise ValueError("columns must be distinct location indices")
        if self.D_NO.shape != (n, len(cols)) or self.C_NO.shape != self.D_NO.shape:
            raise ValueError(f"D_NO and C_NO must be ({n}, {len(cols)}), got {self.D_NO.shape} and {self.C_NO.shape}")
        if self.p.shape != (n,) or abs(self.p.sum() - 1.0) > 1e-9:
            raise ValueError("p must have one non-negative weight per LR row, summing to 1")
        return self

    @property
    def n(self) -> int:
        """The number of locations in the user's LR set."""
        return int(self.D_NN.shape[0])


class ObfuscationResponse(Message):
    """server -> user: the LP values the user needs to assemble its LR matrix: the free
    probabilities ``free`` (null where the entry follows the exponential mechanism) and the
    weights y' (one per global location; z[i, k] = y'_k h_ik for exponential entries).
    The user learns y', which depends on the other users' requests only through the LP."""

    type: Literal["ObfuscationResponse"] = "ObfuscationResponse"
    user: str = Field(pattern=NAME_PATTERN)
    free: FreeOrNull = Field(description="(n, o) free probabilities; null for exponential entries")
    y: YPrime = Field(description="(K,) y' of every location")
    status: str = Field(max_length=500, description="how the round's solve ended")
    upper_bound: float | None = Field(default=None, ge=-1e12, le=1e12,
                                      description="the round's LP objective (Theorem 4.6), null if unknown")
    lower_bound: float | None = Field(default=None, ge=-1e12, le=1e12,
                                      description="a rigorous lower bound on it, null if unknown")

    @field_validator("upper_bound", "lower_bound", mode="before")
    @classmethod
    def _unknown(cls, v: Any) -> Any:
        """A bound the solve did not reach (infinite) is unknown: null."""
        return None if isinstance(v, float) and not math.isfinite(v) else v


