"""The memory of an LR-Geo round, estimated before anything is allocated.

Everything a round allocates is sized by the grid and the parameters, which are known before
the first array exists: the largest LR set a user can have is bounded by the locations within
``lr_radius`` of one location (path distances in the Geo-Ind graph are at least the Haversine
distance), its obfuscation range by those within ``lr_radius + r_obf``, a row's free entries
by those within ``r_exp`` and its Geo-Ind neighbours by those within ``eta``. Counting those
over the locations' centres (a k-d tree over K points) gives, per part, bytes that bound what
the part allocates for the worst placed users:

- ``world``: the locations' Haversine and travel matrices (K x K each), and one chunk of
  Dijkstra output (:data:`certdp.datasets.city.DIJKSTRA_CHUNK_BYTES`);
- ``measures``: the expected costs between locations (K x K), which measuring a round needs;
- ``table``: the reference table (:func:`certdp.lrgeo.table.build_table`): travel from every
  location to every fine cell held, the node pairs within the band, and its work chunks;
- ``lr_sets``: each user's distances to every location, LR-set distances, costs and upload;
- ``blocks``: each user's LP block (every entry of its rows and columns once, the Geo-Ind rows
  between free entries, the build's temporaries);
- ``solve``: two HiGHS models per block (kept for the whole Benders solve), the master's two
  models with every cut of every round (up to two per user a round, each over the K + 1
  entries of y; idle cuts leave the master, which this does not count on), the responses;
- ``certify``: the users' certified matrices (n x K each) and the certification's work.

The model's constants are bytes per entry counted in the code that allocates them, rounded
up; ``benchmarks/paper003/scale.py`` puts the measured growth of each part beside them.

:func:`check_round` refuses a setting whose estimate is above the memory available (or a
given limit) with a :class:`MemoryLimitError` naming the estimate, its parts and the largest
setting that fits: the most users on this grid, and the largest square grid over the same
area for this many users.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.spatial import cKDTree

from .. import _validate as V
from ..datasets.city import DIJKSTRA_CHUNK_BYTES, World, grid_centres, project_km
from .user import LRGeoParams

GB = 1e9
MB = 2**20

#: Benders' rounds at most, LRGeoServer.solve's default limit and what the master's cuts are
#: sized for: the Gold Coast rounds at the paper's settings took 138-162 (docs/lrgeo.md)
MAX_ROUNDS = 200
#: bytes of a block's HiGHS model per row (its matrix both ways, factor and work vectors):
#: 190 MB for 10 blocks of 242,000 rows in all at the paper's settings (benchmarks/paper003/scale.py).
#: Benders keeps two models per block (the stabilised point's and the repair point's).
HIGHS_ROW_BYTES = 800
#: bytes a master HiGHS model holds per nonzero of its cuts, grown a round at a time and
#: re-solved: at most 233 replaying 4 and 10 dense cuts a round over K + 1 = 1,601 columns to
#: 300 rounds (benchmarks/paper003/results/master_memory.md).
CUT_NONZERO_BYTES = 300
#: the master's models: the whole master (the lower bound) and the level box's
MASTER_MODELS = 2


class MemoryLimitError(ValueError):
    """A round that would not fit in memory, refused before anything was allocated."""


@dataclass(frozen=True)
class Counts:
    """The largest neighbourhoods of any location, which bound every array of a round."""

    K: int
    lr: int           # locations within lr_radius (bounds an LR set)
    columns: int      # locations within lr_radius + r_obf (bounds an obfuscation range)
    free: int         # locations within r_exp (a row's free entries)
    neighbours: int   # locations within eta, itself excluded (a row's Geo-Ind pairs)
    band: int         # locations within the reference table's band
    coupled: int      # locations within r_obf (a row's entries coupled to the master)
    pair_rows: int    # Geo-Ind rows of one LR row between free entries: over its neighbours j,
                      # the columns within r_exp of both

    @classmethod
    def of(cls, latlon: np.ndarray, lat0: float, params: LRGeoParams) -> Counts:
        """The counts of the locations ``latlon`` (projected about latitude ``lat0``) under ``params``."""
        xy = project_km(latlon, lat0)
        tree = cKDTree(xy)
        K = len(xy)

        def most(r: float) -> int:
            if not math.isfinite(r):
                return K
            # the projection distorts distances by well under 1% over a city: count a little wider
            return int(tree.query_ball_point(xy, r * 1.02 + 1e-9, return_length=True).max())

        pair_rows = 0
        if math.isfinite(params.gamma):
            near = tree.sparse_distance_matrix(tree, params.r_exp * 1.02 + 1e-9, output_type="coo_matrix")
            F = sp.csr_matrix((np.ones(near.nnz), (near.row, near.col)), shape=(K, K))
            pairs = tree.sparse_distance_matrix(tree, params.gamma * 1.02 + 1e-9, output_type="coo_matrix")
            off = pairs.row != pairs.col
            shared = np.asarray((F[pairs.row[off]].multiply(F[pairs.col[off]])).sum(axis=1)).ravel()
            pair_rows = int(np.bincount(pairs.row[off], weights=shared, minlength=K).max(initial=0))
        else:
            pair_rows = K * most(params.r_exp)
        return cls(K=K, lr=most(params.lr_radius), columns=most(params.lr_radius + params.r_obf),
                   free=most(params.r_exp), neighbours=max(0, most(params.gamma) - 1), band=most(params.table_band),
                   coupled=most(params.r_obf), pair_rows=pair_rows)


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per part of a round of ``users`` users (see the module docstring)."""

    users: int
    shape: tuple[int, int]
    counts: Counts
    parts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Bytes of every part together."""
        return int(sum(self.parts.values()))

    def describe(self) -> str:
        """The parts in GB, one ``name size`` per part, for a message."""
        return ", ".join(f"{k} {v / GB:.2g}" for k, v in self.parts.items())


def _parts(c: Counts, users: int, pending: int = 0, rounds: int = MAX_ROUNDS) -> dict[str, int]:
    K, n, o = c.K, min(c.lr, c.K), min(c.columns, c.K)
    nx = n * min(c.free, o)                     # a block's free entries
    rows = n + nx + n * c.pair_rows             # unit rows, upper bounds, Geo-Ind rows
    nnz = n * min(c.coupled, o) + 2 * nx + 2 * n * c.pair_rows
    block_kept = 12 * nnz + 8 * rows
    block_build = 100 * n * o                   # one block's dense (n, o) work arrays
    return {
        "world": 8 * 3 * K * K + DIJKSTRA_CHUNK_BYTES,
        "measures": 8 * 2 * K * K + 64 * MB,   # expected costs (K x K) and their work chunk
        "table": 8 * K * 4 * K + 48 * 4 * K * c.band + 3 * 32 * MB + DIJKSTRA_CHUNK_BYTES,
        "lr_sets": users * 8 * (n * K + n * n + 3 * n * o) + 48 * n * o + pending * 8 * (n * n + 2 * n * o),
        "blocks": users * block_kept + block_build,
        "solve": users * (2 * HIGHS_ROW_BYTES * rows + block_kept + 8 * n * o) + block_build
        + MASTER_MODELS * CUT_NONZERO_BYTES * 2 * users * rounds * (K + 1),
        "certify": users * 8 * n * K + 6 * 8 * n * K,
    }


#: the most bytes one number takes in a JSON upload ("-2.2250738585072014e-308, ")
JSON_NUMBER_BYTES = 26


def upload_bytes(counts: Counts) -> int:
    """The most bytes an honest user's upload (its JSON) can take: distances between its LR
    rows, distances and costs to its columns, weights and column ids, for the largest LR set
    and obfuscation range of the grid."""
    n, o = min(counts.lr, counts.K), min(counts.columns, counts.K)
    return JSON_NUMBER_BYTES * (n * n + 2 * n * o + n + o) + 1024


def estimate_round(world: World, params: LRGeoParams, users: int, *, pending: int = 0,
                   rounds: int = MAX_ROUNDS) -> MemoryEstimate:
    """Bytes a round of ``users`` users would allocate on ``world`` (nothing is allocated but
    a k-d tree over the K centres). ``pending``: uploads of further users held meanwhile (a
    server's users in flight); ``rounds``: the Benders rounds the solve may take."""
    c = Counts.of(world.latlon, world.lat0, params)
    return MemoryEstimate(users, world.shape, c, _parts(c, users, pending, rounds))


def _largest(fits, lo: int, hi: int) -> int:
    """The largest v in [lo, hi] with fits(v) (fits is monotone), or lo - 1 if none."""
    if not fits(lo):
        return lo - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def check_round(world: World, params: LRGeoParams, users: int, *, limit: float | None = None, pending: int = 0,
                what: str = "users") -> MemoryEstimate:
    """The estimate of a round (:func:`estimate_round`) if it fits within ``limit`` bytes
    (default :func:`certdp._validate.available_memory`); otherwise :class:`MemoryLimitError` with the estimate,
    its parts and the largest setting that fits: the most ``what`` (users per round, or
    ``pending`` users held by a server) on this grid, and the largest square grid over the
    same area at this setting."""
    budget = V.available_memory() if limit is None else float(limit)
    est = estimate_round(world, params, users, pending=pending)
    if est.total <= budget:
        return est
    c = est.counts
    if what == "pending":
        most = _largest(lambda m: sum(_parts(c, users, m).values()) <= budget, 0, max(pending, 0))
        fit = f"at most {most} user{'s' * (most != 1)} in flight (--max-pending)" if most >= 1 else "no user in flight"
    else:
        most = _largest(lambda m: sum(_parts(c, m, pending).values()) <= budget, 1, max(users, 1))
        fit = f"at most {most} user{'s' * (most != 1)}" if most >= 1 else "not one user"
    side = _largest_grid(world, params, users, pending, budget)
    grid = f"a grid of at most {side}x{side} over this area" if side >= 2 else "no grid over this area"
    raise MemoryLimitError(
        f"a round of {users} users on the {world.shape[0]}x{world.shape[1]} grid needs about {est.total / GB:.2f} GB "
        f"({est.describe()} GB), above the {budget / GB:.2f} GB available; fits: {fit} on this grid, or {grid} "
        f"for {users} users")


def _largest_grid(world: World, params: LRGeoParams, users: int, pending: int, budget: float) -> int:
    """The largest side s of an s x s grid over the world's area whose round fits the budget."""
    bbox = world.bbox
    if bbox is None:
        return 0

    def fits(side: int) -> bool:
        ll = grid_centres(bbox, side, side)
        return sum(_parts(Counts.of(ll, world.lat0, params), users, pending).values()) <= budget

    return _largest(fits, 2, max(world.shape))
