"""LR-Geo measures: Geo-Ind violations across users (Eq. 34-35) and Proposition 4.5's upper
bounds on their ratio (Eq. 29-30), the relaxed lower bound of Theorem 4.7, what the server can infer from the uploads (section 4.7), and the report of a
whole round that puts them together."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..datasets.city import World
from ..pmo.outputs.solve import solve_outputs
from ..space import Space, haversine_km
from .messages import ObfuscationRequest
from .user import LRGeoParams, geo_ind_path_distance

if TYPE_CHECKING:
    from .protocol import LRGeoRound


# ------------------------------------------------------------------ violations
#: a Geo-Ind check z_ik <= exp(eps d) z_jk counts as violated only above this excess: below it
#: is floating-point noise of the LP solution (docs/decisions.md#a-geo-ind-violation-counts-above-an-excess-of-1e-9)
VIOLATION_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Violations:
    """Geo-Ind checks between rows of different users' matrices (Eq. 34-35).

    ``paper_pairs`` is Eq. 30's denominator, sum_n |N_n| (sum_n |N_n| - 1) |V|: every ordered
    pair of LR rows of all users, times the columns (the pairs within a user satisfy Geo-Ind by
    certification, and pairs beyond gamma need not). Pairs of rows at distance 0 (one location
    in two users' LR sets, whose rows must be equal) are counted apart as well."""

    cross_checked: int       # (row pair, column) checks across users within gamma, both directions
    cross_violations: int    # of them, excess above the tolerance
    paper_pairs: int         # Eq. 30's denominator
    zero_checked: int        # checks between rows at distance 0
    zero_violations: int
    errors: np.ndarray       # excess z_ik - exp(eps d) z_jk of every violation (Eq. 35)
    tolerance: float = VIOLATION_TOLERANCE
    by_pair: np.ndarray | None = None   # (M, M) violations between users a < b (upper triangle)
    sizes: tuple[int, ...] = ()          # |N_m| of each user

    @property
    def cross_ratio(self) -> float | None:
        """The share of cross-user pairs checked that violate Geo-Ind; None where none was checked."""
        return self.cross_violations / self.cross_checked if self.cross_checked else None

    @property
    def ratio(self) -> float:
        """The paper's GV ratio (section 5.1.3 with Eq. 30's denominator)."""
        return self.cross_violations / self.paper_pairs if self.paper_pairs else 0.0

    def pair_ratios(self, K: int) -> np.ndarray:
        """(M, M) the GV ratio of each pair of users a < b with Eq. 29's denominator,
        (|N_a| + |N_b|)(|N_a| + |N_b| - 1) |V| (every ordered pair of their LR rows); 0 elsewhere."""
        M = len(self.sizes)
        out = np.zeros((M, M))
        if self.by_pair is None:
            return out
        for a in range(M):
            for b in range(a + 1, M):
                n = self.sizes[a] + self.sizes[b]
                out[a, b] = self.by_pair[a, b] / (n * (n - 1) * K)
        return out

    def summary(self) -> dict:
        """A JSON-ready summary of the violation counts, ratios and errors. The shares of checks
        that violate, and the errors' statistics (over the violations: 0 where the checks found
        none), are None where nothing was checked (no two users' rows within gamma): nothing was
        measured, which is not a share or an error of 0, so that averages over draws can leave
        such draws out."""
        e = self.errors
        pos = self.cross_checked - self.zero_checked

        def stat(f) -> float | None:
            return None if not self.cross_checked else float(f(e)) if len(e) else 0.0
        return {"violation_ratio": self.ratio, "cross_user_violation_ratio": self.cross_ratio,
                "positive_distance_violation_ratio": ((self.cross_violations - self.zero_violations) / pos
                                                      if pos else None),
                "violations": self.cross_violations, "checked": self.cross_checked, "paper_pairs": self.paper_pairs,
                "distance0_checked": self.zero_checked, "distance0_violations": self.zero_violations,
                "violation_tolerance": self.tolerance,
                "max_error": stat(np.max), "p50_error": stat(np.median),
                "p99_error": stat(lambda v: np.quantile(v, 0.99))}


def violations(world: World, rows: list[np.ndarray], matrices: list[np.ndarray], epsilon: float,
               gamma: float, tolerance: float = VIOLATION_TOLERANCE) -> Violations:
    """Count z_ik > exp(eps d_ij) z_jk + ``tolerance`` over rows i, j of different users with
    d_ij <= gamma, every column k and both directions (one location in two users: d = 0, so
    the rows must be equal)."""
    H = world.haversine
    K = world.K
    cross = viol = zero = zviol = 0
    errs = []
    by_pair = np.zeros((len(rows), len(rows)), dtype=np.int64)
    for a in range(len(rows)):
        for b in range(a + 1, len(rows)):
            D = H[np.ix_(rows[a], rows[b])]
            i, j = np.nonzero(D <= gamma)
            if len(i) == 0:
                continue
            d = D[i, j]
            f = np.exp(epsilon * d)[:, None]
            Za, Zb = matrices[a][i], matrices[b][j]
            at0 = d <= 0
            for X, Y in ((Za, Zb), (Zb, Za)):
                ex = X - f * Y
                bad = ex > tolerance
                viol += int(bad.sum())
                by_pair[a, b] += int(bad.sum())
                zviol += int(bad[at0].sum())
                errs.append(ex[bad])
            cross += 2 * len(i) * K
            zero += 2 * int(at0.sum()) * K
    n_rows = sum(len(r) for r in rows)
    return Violations(cross, viol, n_rows * (n_rows - 1) * K, zero, zviol,
                      np.concatenate(errs) if errs else np.zeros(0), tolerance, by_pair,
                      tuple(len(r) for r in rows))


def violation_bounds(world: World, rows: list[np.ndarray], r_exp: float) -> tuple[float, np.ndarray]:
    """Proposition 4.5's upper bounds on the GV ratio: Eq. 30 for all users, and Eq. 29 for
    each pair of users a < b ((M, M), upper triangle).

    A_i, the columns of LR row i that follow the exponential mechanism, is every column
    farther than ``r_exp`` from v_i (Eq. 19 within r_obf, y'_k beyond it). Theorem 4.4 makes
    both directions of a cross-user check hold whenever k is in A_i and A_j, and each user's
    own pairs hold by certification; the bound is one minus their share of every ordered pair
    of LR rows times |V|. Per column k the pairs with k in both sets number
    (|N_a| - f_a(k)) (|N_b| - f_b(k)), f_a(k) the rows of user a within r_exp of k."""
    K = world.K
    n = np.array([len(r) for r in rows], dtype=np.float64)
    exp_rows = [len(r) - np.count_nonzero(world.haversine[r] <= r_exp, axis=0) for r in rows]   # (K,) each
    M = len(rows)
    both = np.zeros((M, M))
    for a in range(M):
        for b in range(a + 1, M):
            both[a, b] = float(np.dot(exp_rows[a].astype(np.float64), exp_rows[b]))
    own = (n * n - n) * K
    eq29 = np.zeros((M, M))
    for a in range(M):
        for b in range(a + 1, M):
            t = n[a] + n[b]
            eq29[a, b] = 1.0 - (2.0 * both[a, b] + own[a] + own[b]) / (t * (t - 1) * K)
    N = float(n.sum())
    eq30 = 1.0 - (2.0 * both.sum() + own.sum()) / (N * (N - 1) * K) if N > 1 else 0.0
    return eq30, eq29


# ----------------------------------------------------------------- lower bound
#: The relaxed LR problem is solved to this certified gap. Its lower bound is rigorous at any
#: gap; the gap only says how far below the relaxed optimum it may be.
RELAXED_GAP = 1e-3


def relaxed_space(D_NN: np.ndarray, gamma: float, epsilon: float, c_low: np.ndarray) -> tuple[Space | None, float]:
    """The relaxed LR problem (Theorem 4.7, Eq. 31-32) with costs ``c_low`` (n, K) over the LR
    rows at distances ``D_NN``, as a PMO instance: rows that sum to 1, the Geo-Ind rows of the
    pairs within ``gamma`` in every column, entries in [0, 1]. Returns the :class:`Space` and a
    constant: the relaxed optimum is n x the space's optimum (its prior is uniform) plus that
    constant. Each row's costs are shifted by their minimum (rows sum to 1, so the shift adds a
    constant), since a space's costs are non-negative and ``c_low`` may be below 0 where the
    user's estimate (Eq. 33) is. The space is None when every row is flat (the optimum is the
    constant)."""
    c = np.asarray(c_low, dtype=np.float64)
    if c.ndim != 2 or c.shape[0] < 1:
        raise ValueError(f"c_low must be (n, K) with n >= 1, got shape {c.shape}")
    n = c.shape[0]
    shift = c.min(axis=1)
    rest = c - shift[:, None]
    if not rest.any():
        return None, float(shift.sum())
    D = np.asarray(D_NN, dtype=np.float64)
    D = np.maximum(D, D.T)   # where rounding makes D asymmetric, the longer reading: fewer and looser pairs
    np.fill_diagonal(D, 0.0)
    return (Space(cost=rest, prior=np.full(n, 1.0 / n), epsilon=epsilon, eta=gamma, metric="precomputed",
                  distance_matrix=D, name="relaxed LR problem"), float(shift.sum()))


def relaxed_bounds(D_NN: np.ndarray, gamma: float, epsilon: float, c_low: np.ndarray, *,
                   gap: float = RELAXED_GAP) -> tuple[float, float]:
    """Rigorous bounds ``(lower, upper)`` on the optimum of the relaxed LR problem
    (:func:`relaxed_space`), by the decomposition over outputs
    (:func:`certdp.pmo.outputs.solve.solve_outputs`): ``lower`` is its Lagrangian bound,
    rigorous whatever HiGHS's accuracy (its pricing bounds), ``upper`` the cost of its
    certified matrix. Monolithic HiGHS takes minutes to hours on the larger LR sets, this
    seconds (docs/lrgeo.md#the-relaxed-lower-bound, ``tables.py --part relaxed``).

    The two are ``gap`` apart relative to the shifted objective when the engine reaches it. At
    eps x d near or beyond 15 within gamma the engine can stall short of it (0.2-0.4% at 30-40
    LR rows and eps x gamma 18, more on smaller sets at eps x d in the hundreds), so the
    caller reads how far apart they are, not ``gap``."""
    space, constant = relaxed_space(D_NN, gamma, epsilon, c_low)
    if space is None:
        return constant, constant
    res = solve_outputs(space, gap=gap)
    assert res.lower_bound is not None       # the decomposition always has its Lagrangian bound
    n = space.n_records
    return float(n * res.lower_bound + constant), float(n * res.upper_bound + constant)


# ------------------------------------------------------------------- inference
def table_inference(req: ObfuscationRequest, pair_beta: np.ndarray, snap_max_km: float) -> np.ndarray:
    """Paper section 4.7: for each uploaded cost c-hat (per unit of p), the number of rows of the
    requested reference table whose beta is consistent with it, i.e. lies in
    [c-hat/p - 2 e_max, c-hat/p] (c-hat/p = beta + e_i + e_k with 0 <= e <= e_max)."""
    C = req.C_NO / req.p[:, None]
    v = C[~np.isnan(C)]
    b = np.sort(np.asarray(pair_beta, dtype=np.float64))
    # pairs of one node with itself (beta 0) are rows of the table too
    return np.searchsorted(b, v, side="right") - np.searchsorted(b, v - 2.0 * snap_max_km, side="left")


def column_inference(req: ObfuscationRequest, world: World, params: LRGeoParams, location: int | None = None,
                     tol: float = 1e-9) -> dict:
    """What the server learns from ``columns`` and ``D_NO`` (the price of sharing y).

    Each LR row is located by trilateration: the locations v of V with d(v, k) = D_NO[i, k]
    for every uploaded column k. If every row is pinned down, the server knows N_m and then
    every location whose ball of radius ``params.lr_radius`` in the (public) Geo-Ind graph is
    exactly N_m could be its centre; the user is within ``params.hide`` of that centre (the
    centre itself when hide = 0). The server's best estimate is the most likely candidate (a
    centre is drawn uniformly within hide of the user, so a candidate u has likelihood
    1 / |hide-ball of u|). With the user's ``location``, the estimate's error (km) is added."""
    Dv = haversine_km(world.latlon[:, None, :], world.latlon[req.columns][None, :, :])  # (K, o)
    located = np.full(req.n, -1)
    for i in range(req.n):
        cand = np.flatnonzero(np.max(np.abs(Dv - req.D_NO[i][None, :]), axis=1) <= tol)
        if len(cand) == 1:
            located[i] = cand[0]
    share = float(np.mean(located >= 0))
    centres: list[int] = []
    users: list[int] = []
    if np.all(located >= 0):
        N = set(located.tolist())
        R = params.lr_radius
        for c in located:
            D = geo_ind_path_distance(world, params.gamma, int(c), R)
            if set(np.flatnonzero(D <= R).tolist()) == N:
                centres.append(int(c))
        if params.hide > 0:
            near = set()
            for c in centres:
                near |= set(np.flatnonzero(geo_ind_path_distance(world, params.gamma, c, params.hide)
                                           <= params.hide).tolist())
            users = sorted(near)
        else:
            users = list(centres)
    out: dict[str, Any] = {"rows_located": share, "candidate_centres": centres, "candidate_locations": users}
    if users:
        if params.hide > 0:
            size = [int(np.count_nonzero(geo_ind_path_distance(world, params.gamma, u, params.hide) <= params.hide))
                    for u in users]
            best = users[int(np.argmin(size))]
        else:
            best = users[0]
        out["estimate"] = best
        if location is not None:
            out["error_km"] = float(world.haversine[best, location])
            out["located"] = users == [location]
    return out


# ------------------------------------------------------------------- one round
def measure_round(rnd: "LRGeoRound", *, lower_bound: bool = True) -> dict[str, Any]:
    """The report of one round: what the server solved (bounds, gap, iterations, seconds), the
    true expected cost of the users' own rows and of their LR objectives, the lower bound of
    Theorem 4.7 and the approximation ratio, Geo-Ind violations across users (Eq. 34-35), and
    what the server can infer from the uploads (section 4.7).

    ``lower_bound=False`` leaves the bound and the ratios out (None), for a caller that reports
    costs only (each user's bound is a solve of its own: 1-8 s at K = 100-400)."""
    world, params, us, mechs, info, server = rnd.world, rnd.params, rnd.users, rnd.mechanisms, rnd.info, rnd.server
    rep: dict[str, Any] = {"world": world.describe(), "users": len(us), "method": info.method,
                           "status": info.status, "message": info.message, "lp_upper_bound": info.upper_bound,
                           "lp_lower_bound": info.lower_bound, "lp_gap": info.gap,
                           "iterations": info.iterations, "seconds": dict(rnd.seconds),
                           "certify_mixing": rnd.certify_mixing,
                           "lr_set_sizes": [u.n for u in us], "obf_sizes": [int(len(u.obf)) for u in us]}
    cbar = world.expected_cost
    own = [float(cbar[u.location] @ m.matrix[u.row_of_location]) for u, m in zip(us, mechs)]
    lr_obj = [float(np.mean(np.sum(cbar[u.lr] * m.matrix, axis=1))) for u, m in zip(us, mechs)]
    rep["expected_cost_own_row"] = float(np.mean(own))
    rep["expected_cost_lr_sets"] = float(np.sum(lr_obj))
    rep["lower_bound"] = rep["relaxed_upper_bound"] = None
    rep["approximation_ratio"] = rep["approximation_ratio_true_cost"] = None
    if lower_bound:
        both = np.array([relaxed_bounds(u.D_NV[:, u.lr], params.gamma, params.epsilon, u.lower_bound_costs(cbar))
                         for u in us])
        lb = float(both[:, 0].sum())
        rep["lower_bound"] = lb
        rep["relaxed_upper_bound"] = float(both[:, 1].sum())   # how tight the lower bound is
        # the paper's ratio (Fig. 9-10) has Theorem 4.6's upper bound, the LP's objective, on top;
        # ours has the true expected cost of the returned (certified) matrices. None where the
        # bound is 0 (at eps d above the float range every row may keep its own location in the
        # relaxation): the ratio is then undefined, not infinite
        rep["approximation_ratio"] = info.upper_bound / lb if lb > 0 else None
        rep["approximation_ratio_true_cost"] = float(np.sum(lr_obj)) / lb if lb > 0 else None
    v = violations(world, [u.lr for u in us], [m.matrix for m in mechs], params.epsilon, params.gamma)
    rep.update(v.summary())
    eq30, eq29 = violation_bounds(world, [u.lr for u in us], params.r_exp)
    upper = np.triu(np.ones_like(eq29, dtype=bool), 1)
    rep["violation_bound_eq30"] = eq30
    rep["violation_bound_eq29_max"] = float(eq29[upper].max()) if upper.any() else 0.0
    rep["violation_ratio_pair_max"] = float(v.pair_ratios(world.K)[upper].max()) if upper.any() else 0.0
    counts = []
    located, candidates, errors, rows_located = [], [], [], []
    for u in us:
        req = server.requests[u.name]
        tr = server.table_rows(*server.circles[u.name])
        counts.append(table_inference(req, tr.pair_beta, server.table.snap_max_km))
        ci = column_inference(req, world, params, u.location)
        located.append(bool(ci.get("located", False)))
        rows_located.append(ci["rows_located"])
        candidates.append(len(ci["candidate_locations"]))
        errors.append(ci.get("error_km", math.nan))
    allc = np.concatenate(counts)
    rep["table_inference_mean_rows"] = float(allc.mean()) if len(allc) else 0.0
    rep["table_inference_min_rows"] = int(allc.min()) if len(allc) else 0
    rep["users_located_by_columns"] = float(np.mean(located))
    rep["rows_located_by_columns"] = float(np.mean(rows_located))
    rep["server_candidates_mean"] = float(np.mean(candidates))
    rep["server_estimate_error_km"] = float(np.nanmean(errors)) if not np.all(np.isnan(errors)) else math.nan
    rep["hide"] = params.hide
    return rep
