"""LR-Geo (paper 003) benchmarks: Table 1 (seconds), Table 2 (expected cost, lower bound,
approximation ratio), Figure 9 (scaling in K and in users), Figures 11-13 (violations and
inference).

Instances: the Helsinki walking network (``../shared/data/helsinki``) with a 40 x 40 grid,
K = rows x cols taken as the centred block of that grid (same cells), and a generated grid
city (40 x 40 cells of 250 m). Parameters are the paper's scaled to the cell side (paper:
40 x 40 cells over Rome, about 1.2 km): r_obf 4 km -> 3.3 cells, reference-table cell 0.1 km
-> 1/12 cell, gamma 1.5 cells (the paper does not give it), Gamma 2.5 cells (the authors'
code effectively used 20 LR locations; 2.5 cells gives 12-21), r_exp = r_obf / 2 (not given).
epsilon: ``--eps-cell`` per cell side; the paper's 10/km is 12 per cell, which leaves
adjacent cells e^12 apart (almost no obfuscation); the default 1 per cell keeps the LP far
from trivial.

    python -m benchmarks.paper003.tables --part table --dataset helsinki
    python -m benchmarks.paper003.tables --part scaling --dataset helsinki
    python -m benchmarks.paper003.tables --part privacy --dataset helsinki
    python -m benchmarks.paper003.tables --part remedy --dataset helsinki

``--settings paper`` runs the paper's own parameters instead (eps 10 per km, Gamma 20 km,
r_obf 4 km, 0.1 km table cells; :meth:`LRGeoParams.paper`), meant for ``--dataset romecity``
(a generated city at Rome's scale, 40 x 40 cells of 1.2 km, as the paper's grid), and puts the
paper's reported numbers beside ours; ``--part bounds`` is Figure 10 (approximation ratio
against Gamma and against the table cell size):

    python -m benchmarks.paper003.tables --settings paper --dataset romecity --part table
    python -m benchmarks.paper003.tables --settings paper --dataset romecity --part scaling
    python -m benchmarks.paper003.tables --settings paper --dataset romecity --part privacy
    python -m benchmarks.paper003.tables --settings paper --dataset romecity --part bounds

``--part relaxed`` times Figure 10's denominator, Theorem 4.7's relaxed lower bound, against
monolithic HiGHS on the same LP (``--cap`` seconds each):

    python -m benchmarks.paper003.tables --settings paper --eps-cell 1 --dataset romecity --part relaxed \
        --K 100 400 --Gamma-km 10 20 --cap 300

With ``--settings paper``, ``--eps-cell`` replaces only the paper's epsilon (by that many per
location cell side), keeping its Gamma, r_obf and table cell: the paper's reported costs
(0.33-0.81 km) need eps x cell near 1, where its stated 10/km gives 12 on 1.2 km cells:

    python -m benchmarks.paper003.tables --settings paper --eps-cell 1 --dataset romecity --part table
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

import certdp
from certdp.datasets.city import grid_city, helsinki, load_world
from certdp.experiments.instances import data_dir
from certdp.experiments.lrgeo import run_baseline
from certdp.lrgeo.measures import RELAXED_GAP, measure_round, relaxed_bounds, relaxed_space
from certdp.lrgeo.protocol import run_round
from certdp.lrgeo.table import build_table
from certdp.lrgeo.user import LRGeoParams

from .._common import output_args, write_table

DATA = data_dir() / "helsinki"
SHAPES = {100: (10, 10), 200: (10, 20), 300: (15, 20), 400: (20, 20), 800: (20, 40), 1200: (30, 40), 1600: (40, 40)}


#: paper 003's reported numbers (Tables 1-2: LR-Geo, LR-Geo-F, LP, ConstOPT seconds and costs
#: in km, Laplace and ExpMech costs, the lower bound and the approximation ratio, at K = 100-400;
#: Figures 9-13 as stated in its text)
PAPER: dict[str, Any] = {   # per method and K, per K, or a sentence
    "seconds": {"lrgeo": [1.28, 1.42, 1.34, 1.20], "lrgeo_f": [1.63, 2.14, 2.42, 3.56],
                "lp": [27.31, 287.50, ">=1800", ">=1800"], "constopt": [3.69, 75.88, ">=1800", ">=1800"],
                "laplace": ["<=0.005"] * 4, "expmech": ["<=0.005"] * 4},
    "cost": {"lrgeo": [0.36, 0.36, 0.35, 0.37], "lrgeo_f": [0.38, 0.36, 0.38, 0.40], "lp": [0.33, 0.33, None, None],
             "constopt": [0.35, 0.34, None, None], "laplace": [0.81, 0.78, 0.80, 0.79],
             "expmech": [0.67, 0.64, 0.68, 0.70]},
    "lower_bound": [0.29, 0.30, 0.31, 0.30], "ratio": [1.24, 1.2, 1.13, 1.23],
    "fig9": "up to 1.8 s for K = 100-1,600 (4 users); rising with users 2-10",
    "fig11": "GV ratio at most 0.13%", "fig12": "Geo-Ind error up to 0.021",
    "fig13": "102.98 table rows per uploaded coefficient on average (0.1 km cells)",
    "fig10": "ratio falls 34.72% from Gamma 10 to 20 km, 0.79% more to 50 km; stable up to 0.2 km cells",
}
PAPER_K = [100, 200, 300, 400]


def base_world(name: str):
    if name == "helsinki":
        if not (DATA / "helsinki_walking_nodes.csv").is_file():
            sys.exit(f"Helsinki data not found in {DATA}; use --dataset gridcity")
        return helsinki(DATA)
    if name == "romecity":
        return load_world("romecity", 40, 40)
    return grid_city(40, 40, cell_km=0.25, seed=0)


def params_for(world, a, lrgeo_f: bool = False, **over) -> LRGeoParams:
    """The paper's parameters (``--settings paper``; epsilon ``--eps-cell`` per cell side when
    given) or the scaled ones at ``--eps-cell``, with ``over`` (LRGeoParams fields) replacing
    some."""
    if a.settings == "paper":
        P = LRGeoParams.paper(world.cell)
        eps = {} if a.eps_cell is None else {"epsilon": a.eps_cell / world.cell}
        fields = {**P.__dict__, **eps, **({"gamma": float("inf")} if lrgeo_f else {}), **over}
        return LRGeoParams(**fields)
    P = LRGeoParams.scaled(world.cell, eps_cell=a.eps_cell, lrgeo_f=lrgeo_f)
    return LRGeoParams(**{**P.__dict__, **over}) if over else P


def add_eps_cell(p: argparse.ArgumentParser) -> None:
    """``--eps-cell``, read by :func:`params_for` once :func:`settle_eps_cell` has run."""
    p.add_argument("--eps-cell", type=float, default=None,
                   help="epsilon per location cell side (default 1; with --settings paper, the paper's 10/km "
                        "unless given)")


def settle_eps_cell(a: argparse.Namespace) -> None:
    """The scaled settings' epsilon is 1 per cell unless given; the paper's settings keep None
    (the paper's 10/km) unless given."""
    if a.eps_cell is None and a.settings == "scaled":
        a.eps_cell = 1.0


def tag(a) -> str:
    """The results-file suffix: the dataset, the settings and epsilon where it is not the
    settings' own."""
    if a.settings == "paper":
        return f"{a.dataset}_paper" + ("" if a.eps_cell is None else f"_eps{a.eps_cell:g}")
    return f"{a.dataset}_eps{a.eps_cell:g}"


def settings_title(a) -> str:
    if a.settings == "paper":
        eps = "eps 10/km" if a.eps_cell is None else f"eps {a.eps_cell:g} per cell instead of the paper's 10/km"
        return f"paper's settings: {eps}, Gamma 20 km, r_obf 4 km, 0.1 km table"
    return f"eps {a.eps_cell:g} per cell"


def paper_value(kind: str, method: str, K: int):
    """The paper's figure for ``kind`` ('seconds', 'cost') of ``method`` at ``K``, or None."""
    if K not in PAPER_K:
        return None
    v = PAPER[kind].get(method) if kind in ("seconds", "cost") else PAPER[kind]
    return None if v is None else v[PAPER_K.index(K)]


def _mean(values):
    v = [t for t in values if t is not None]
    return float(np.mean(v)) if v else None


def part_table(a) -> None:
    full = base_world(a.dataset)
    rows, raw = [], []
    paper = a.settings == "paper"
    for K in a.K:
        w = full.block(*SHAPES[K])
        P = params_for(w, a)
        tab = build_table(w, P.cell, P.table_band)
        for rep in range(a.reps):
            r = run_round(w, P, users=a.users, seed=rep, table=tab)
            rep_r = measure_round(r)
            res = {"K": K, "rep": rep, "lrgeo": rep_r, "lrgeo_f": None, "baselines": []}
            if a.lrgeo_f and K <= a.f_max_K:
                rf = run_round(w, params_for(w, a, True), users=a.users, seed=rep, table=tab, time_limit=a.cap)
                res["lrgeo_f"] = measure_round(rf, lower_bound=False)   # the table shows its cost only
            locs = np.array([u.location for u in r.users])
            for b in a.baselines:
                res["baselines"].append(run_baseline(b, w, P, locs, time_limit=a.cap, seed=rep))
                print(K, rep, res["baselines"][-1], flush=True)
            raw.append(res)
            print(K, rep, rep_r["seconds"]["solve"], rep_r["method"], rep_r["approximation_ratio"], flush=True)
    methods = ["lrgeo"] + (["lrgeo_f"] if a.lrgeo_f else []) + list(a.baselines)

    def get(x, m, key):
        if m in ("lrgeo", "lrgeo_f"):
            y = x[m]
            return None if y is None else (y["seconds"]["solve"] if key == "seconds" else y[key])
        y = next(y for y in x["baselines"] if y["method"] == m)
        return y[key] if y["status"] == "ok" else None

    for K in a.K:
        rs = [x for x in raw if x["K"] == K]
        for m in methods:
            row = [K, m, _mean(get(x, m, "seconds") for x in rs), _mean(get(x, m, "expected_cost_own_row") for x in rs)]
            if paper:
                row += [paper_value("seconds", m, K), paper_value("cost", m, K)]
            rows.append(row)
        row = [K, "lower bound (Thm 4.7)", None, _mean(x["lrgeo"]["lower_bound"] for x in rs)]
        rows.append(row + ([None, paper_value("lower_bound", "", K)] if paper else []))
        for key, name in (("approximation_ratio", "ratio (LP bound / lower bound)"),
                          ("approximation_ratio_true_cost", "ratio (true cost / lower bound)")):
            row = [K, name, None, _mean(x["lrgeo"][key] for x in rs)]
            rows.append(row + ([None, paper_value("ratio", "", K) if key == "approximation_ratio" else None]
                               if paper else []))
        rows.append([K, "solver", ";".join(sorted({x["lrgeo"]["method"] + " " + x["lrgeo"]["status"] for x in rs})),
                     None] + ([None, None] if paper else []))
    cols = ["K", "method", "seconds", "cost (km) / value"] + (["paper s", "paper cost / value"] if paper else [])
    write_table(f"lrgeo_table12_{tag(a)}",
                f"LR-Geo Tables 1-2 on {a.dataset} ({settings_title(a)}; {a.users} users, {a.reps} reps)",
                cols, rows, notes=[
                    "Seconds: the CLR-Geo solve (server) for LR-Geo; the whole mechanism for the baselines. "
                    f"Every method capped at {a.cap:g} s (blank: cap hit).",
                    "Cost: mean over the users of the true expected travel-cost error of their own row (km).",
                    "Lower bound: Theorem 4.7 (relaxed problem, Eq. 33 costs), rigorous, on the LR objective (sum "
                    "over users of the mean true cost over their LR rows); ratio (the paper's): the LP's upper "
                    "bound (Theorem 4.6) / lower bound; blank where the bound is <= 0.",
                    "ExpMech uses the distance in the exponent (the paper's cost-in-exponent is not Geo-Ind)."]
                + ([f"LR-Geo-F only at K <= {a.f_max_K}."] if a.lrgeo_f and max(a.K) > a.f_max_K else []),
                raw=raw, args=a)


def part_scaling(a) -> None:
    full = base_world(a.dataset)
    rows, raw = [], []
    for K in a.K:
        w = full.block(*SHAPES[K])
        P = params_for(w, a)
        tab = build_table(w, P.cell, P.table_band)
        for M in a.users_list:
            secs, meths = [], set()
            for rep in range(a.reps):
                t0 = time.perf_counter()
                r = run_round(w, P, users=M, seed=rep, table=tab)
                secs.append(r.seconds["solve"])
                meths.add(r.info.method)
                raw.append({"K": K, "users": M, "rep": rep, "method": r.info.method, "status": r.info.status,
                            "iterations": r.info.iterations, "seconds": dict(r.seconds),
                            "wall": time.perf_counter() - t0})
            rows.append([K, M, float(np.mean(secs)), float(np.max(secs)), ";".join(sorted(meths))])
            print(rows[-1], flush=True)
    write_table(f"lrgeo_fig9_{tag(a)}",
                f"LR-Geo Figure 9: CLR-Geo solve seconds on {a.dataset} ({settings_title(a)})",
                ["K", "users", "mean s", "max s", "solver"], rows, notes=[
                    f"{a.reps} seeded draws of user locations per row; the server's solve only (Benders, gap 1e-4).",
                    "Targets (issue 5): <= 1.5 s for 4 users and <= 5 s for 10 users at K = 1,600."]
                + ([f"Paper (Figure 9): {PAPER['fig9']}."] if a.settings == "paper" else []), raw=raw, args=a)


def over_checked(runs: list[dict], key: str, f) -> float | None:
    """``f`` of ``key`` over the draws where some pair of users' rows was checked (None in the
    others: nothing measured there), or None when no draw checked any."""
    vals = [x[key] for x in runs if x[key] is not None]
    return float(f(vals)) if vals else None


def part_privacy(a) -> None:
    full = base_world(a.dataset)
    w = full.block(*SHAPES[a.K[0]])
    rows, raw = [], []
    for M in a.users_list:
        for rep in range(a.reps):
            P = params_for(w, a)
            raw.append({"users": M, "rep": rep, **measure_round(run_round(w, P, users=M, seed=rep))})
        rs = [x for x in raw if x["users"] == M]
        rows.append(["users", M, float(np.mean([x["violation_ratio"] for x in rs])),
                     float(np.mean([x["violation_bound_eq30"] for x in rs])),
                     float(np.mean([x["violation_ratio_pair_max"] for x in rs])),
                     float(np.mean([x["violation_bound_eq29_max"] for x in rs])),
                     over_checked(rs, "cross_user_violation_ratio", np.mean),
                     over_checked(rs, "max_error", np.max), over_checked(rs, "p99_error", np.mean),
                     float(np.mean([x["table_inference_mean_rows"] for x in rs])),
                     float(np.mean([x["rows_located_by_columns"] for x in rs])),
                     float(np.mean([x["users_located_by_columns"] for x in rs])),
                     float(np.mean([x["server_candidates_mean"] for x in rs]))])
        print(rows[-1], flush=True)
    for cell in table_cells(a, w):
        P = params_for(w, a, cell=cell)
        rep_r = measure_round(run_round(w, P, users=4, seed=0))
        raw.append({"table_cell_km": cell, **rep_r})
        rows.append(["table cell (km)", cell, rep_r["violation_ratio"], rep_r["violation_bound_eq30"],
                     rep_r["violation_ratio_pair_max"], rep_r["violation_bound_eq29_max"],
                     rep_r["cross_user_violation_ratio"],
                     rep_r["max_error"], rep_r["p99_error"], rep_r["table_inference_mean_rows"],
                     rep_r["rows_located_by_columns"], rep_r["users_located_by_columns"],
                     rep_r["server_candidates_mean"]])
        print(rows[-1], flush=True)
    write_table(f"lrgeo_privacy_{tag(a)}",
                f"LR-Geo Figures 11-13 on {a.dataset}, K={w.K} ({settings_title(a)})",
                ["varied", "value", "violation ratio (Eq. 34)", "Eq. 30 bound", "worst pair of users",
                 "Eq. 29 bound (worst pair)", "cross-user ratio", "max error (Eq. 35)",
                 "p99 error", "table rows per coefficient", "LR rows located", "users located",
                 "candidate locations"], rows, notes=[
                    "Violation ratio: the paper's GV ratio, violated Geo-Ind inequalities (only pairs of rows "
                    "of different users within gamma can be violated; an excess below 1e-9 is float noise) "
                    "over Eq. 30's denominator, every ordered pair of LR rows of all users, at any distance "
                    "and within a user too, times |V|; worst pair of users: the same for each pair of users "
                    "over Eq. 29's denominator, the largest. Eq. 29 / 30 bounds: Proposition 4.5 "
                    "(lrgeo.measures.violation_bounds), A_i the columns farther than r_exp from v_i.",
                    "Cross-user ratio: violations over the checks actually made, both directions of every pair "
                    "of rows of different users within gamma (a location in two LR sets is a pair at "
                    "distance 0).",
                    "Table rows per coefficient: the paper's section 4.7 metric (rows of the requested reference "
                    "table whose beta is consistent with an uploaded cost).",
                    "LR rows located: share of LR rows the server pins to one location by trilateration from "
                    "the column ids and D_NO that sharing y requires; users located: share of users whose "
                    "location is then the only location whose Gamma-ball is the LR set; candidate locations: "
                    "how many locations have that LR set as their Gamma-ball (all of the block when Gamma "
                    "covers it)."] + ([f"Paper: {PAPER['fig11']}; {PAPER['fig12']}; {PAPER['fig13']}."]
                                          if a.settings == "paper" else []), raw=raw, args=a)


def table_cells(a, w) -> list[float]:
    """Reference-table cell sizes in km: ``--cell-km`` with the paper's settings, else
    ``--cells`` (shares of the location cell)."""
    return list(a.cell_km) if a.settings == "paper" else [f * w.cell for f in a.cells]


def part_bounds(a) -> None:
    """Figure 10: the approximation ratio against the LR distance threshold Gamma and against
    the reference table's cell size (4 users, K = ``--K``)."""
    w = base_world(a.dataset).block(*SHAPES[a.K[0]])
    base = params_for(w, a)
    gammas = list(a.Gamma_km) if a.settings == "paper" else [g * w.cell for g in a.Gamma_cells]
    rows: list[list[Any]] = []
    raw: list[dict[str, Any]] = []
    for name, values, field in (("Gamma (km)", gammas, "Gamma"), ("table cell (km)", table_cells(a, w), "cell")):
        for v in values:
            if field == "Gamma" and v < base.gamma:
                continue
            P = params_for(w, a, Gamma=v) if field == "Gamma" else params_for(w, a, cell=v)
            rs = [measure_round(run_round(w, P, users=a.users, seed=rep)) for rep in range(a.reps)]
            raw.extend({"varied": field, "value": v, **x} for x in rs)
            rows.append([name, v, _mean(np.mean(x["lr_set_sizes"]) for x in rs), _mean(x["lower_bound"] for x in rs),
                         _mean(x["approximation_ratio"] for x in rs),
                         _mean(x["approximation_ratio_true_cost"] for x in rs),
                         _mean(x["seconds"]["solve"] for x in rs)])
            print(rows[-1], flush=True)
    write_table(f"lrgeo_fig10_{tag(a)}",
                f"LR-Geo Figure 10 on {a.dataset}, K={w.K} ({settings_title(a)}; {a.users} users, {a.reps} reps)",
                ["varied", "value", "LR set size", "lower bound", "ratio (LP bound / LB)", "ratio (true cost / LB)",
                 "solve s"], rows,
                notes=["Ratio: Theorem 4.6's upper bound (the LP objective) or the true cost of the LR rows, over "
                       "Theorem 4.7's relaxed lower bound; blank where that bound is <= 0."]
                + ([f"Paper: {PAPER['fig10']}."] if a.settings == "paper" else []), raw=raw, args=a)


def _relaxed_by_monolithic_lp(space, constant: float, cap: float) -> tuple[float | None, str, float]:
    """The baseline of ``--part relaxed``: the same relaxed problem solved whole by monolithic
    HiGHS (``certdp.solve`` method 'lp'), at most ``cap`` seconds; (bound or None, status, s)."""
    t0 = time.perf_counter()
    try:
        res = certdp.solve(space, "lp", time_limit=cap)
    except certdp.SolverLimitError:
        return None, "time limit, nothing feasible", time.perf_counter() - t0
    lb = None if res.lower_bound is None else space.n_records * res.lower_bound + constant
    return lb, str(res.status), time.perf_counter() - t0


def part_relaxed(a) -> None:
    """Theorem 4.7's relaxed lower bound (Figure 10's denominator), each user's, by the
    decomposition over outputs (``relaxed_bounds``) against monolithic HiGHS on the same
    LP (``--cap`` seconds each), over ``--K`` and ``--Gamma-km``; the worst case and the median
    over users and instances below the table."""
    rows: list[list[Any]] = []
    raw: list[dict[str, Any]] = []
    for K in a.K:
        w = base_world(a.dataset).block(*SHAPES[K])
        gammas = list(a.Gamma_km) if a.settings == "paper" else [g * w.cell for g in a.Gamma_cells]
        for g in gammas:
            P = params_for(w, a, Gamma=g)
            rnd = run_round(w, P, users=a.users, seed=0)
            cbar = w.expected_cost
            for u in rnd.users:
                D, c = u.D_NV[:, u.lr], u.lower_bound_costs(cbar)
                space, constant = relaxed_space(D, P.gamma, P.epsilon, c)
                t0 = time.perf_counter()
                lb, _ = relaxed_bounds(D, P.gamma, P.epsilon, c)
                ours = time.perf_counter() - t0
                base, status, secs = (None, "flat", 0.0) if space is None else \
                    _relaxed_by_monolithic_lp(space, constant, a.cap)
                pairs = 0 if space is None else len(space.neighbor_pairs[0])
                rec = {"K": K, "Gamma": g, "user": u.name, "lr_rows": u.n, "pairs": pairs, "bound": lb,
                       "seconds": ours, "lp_bound": base, "lp_status": status, "lp_seconds": secs}
                raw.append(rec)
                rows.append([K, g, u.name, u.n, pairs, lb, ours, base, status, secs, secs / ours])
                print(rows[-1], flush=True)
    times = np.array([r["seconds"] for r in raw])
    ratio = np.array([r["lp_seconds"] / r["seconds"] for r in raw])
    write_table(f"lrgeo_relaxed_bound_{tag(a)}",
                f"Theorem 4.7's relaxed lower bound on {a.dataset} ({settings_title(a)}; {a.users} users)",
                ["K", "Gamma (km)", "user", "LR rows", "pairs", "bound (outputs)", "s", "bound (monolithic LP)",
                 "LP status", "LP s", "LP s / s"], rows,
                notes=[f"Outputs decomposition to gap {RELAXED_GAP:g}: worst {times.max():.3g} s, median "
                       f"{np.median(times):.3g} s over {len(raw)} users; the monolithic LP took {ratio.min():.3g}-"
                       f"{ratio.max():.3g} times as long (median {np.median(ratio):.3g}; at the cap of {a.cap:g} s "
                       "it is stopped, so the ratio there is a lower bound).",
                       "Both bounds are rigorous; the decomposition's is within its gap below the relaxed optimum."],
                raw=raw, args=a)


def part_remedy(a) -> None:
    """What the server learns with and without the hidden LR centre (LRGeoParams.hide), and
    what hiding costs the users."""
    full = base_world(a.dataset)
    w = full.block(*SHAPES[a.K[0]])
    base = params_for(w, a)
    tab = build_table(w, base.cell, base.table_band)
    rows, raw = [], []
    for frac in a.hide:
        P = LRGeoParams(**{**base.__dict__, "hide": frac * base.Gamma})
        rs = []
        for rep in range(a.reps):
            r = run_round(w, P, users=a.users, seed=rep, table=tab)
            rs.append({"hide_over_Gamma": frac, "rep": rep, **measure_round(r)})
        raw.extend(rs)
        rows.append([frac, P.hide, float(np.mean([np.mean(x["lr_set_sizes"]) for x in rs])),
                     float(np.mean([x["seconds"]["solve"] for x in rs])),
                     float(np.mean([x["expected_cost_own_row"] for x in rs])),
                     float(np.mean([x["users_located_by_columns"] for x in rs])),
                     float(np.mean([x["server_candidates_mean"] for x in rs])),
                     float(np.mean([x["server_estimate_error_km"] for x in rs]))])
        print(rows[-1], flush=True)
    write_table(f"lrgeo_remedy_{tag(a)}",
                f"LR-Geo: what the server learns from the uploads, and the hidden-centre remedy ({a.dataset}, "
                f"K={w.K}, {a.users} users, {settings_title(a)})",
                ["hide / Gamma", "hide km", "LR set size", "solve s", "own-row expected cost (km)",
                 "users located", "locations the server cannot tell apart", "server's estimate error (km)"], rows,
                notes=[f"{a.reps} seeded draws per row, the same users in every row; Gamma = {base.Gamma:.3g} km",
                       "hide 0 is the paper's protocol: the LR set is the Gamma-ball of the user, and the column ids "
                       "with D_NO let the server trilaterate every LR row and find that centre",
                       "hide > 0: the LR set is the (Gamma + hide)-ball of a location drawn uniformly within hide of "
                       "the user; the server finds that centre, and the user can be any location within hide of "
                       "it; its best estimate is the most likely of them"], raw=raw, args=a)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, with the defaults that depend on ``--part`` and ``--settings`` filled in."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--part", choices=["table", "scaling", "privacy", "remedy", "bounds", "relaxed"], required=True)
    p.add_argument("--dataset", choices=["helsinki", "gridcity", "romecity"], default="helsinki")
    p.add_argument("--settings", choices=["scaled", "paper"], default="scaled",
                   help="paper: the paper's parameters in km (eps 10/km, Gamma 20 km, r_obf 4 km, 0.1 km table)")
    p.add_argument("--no-lrgeo-f", dest="lrgeo_f", action="store_false", help="table: leave LR-Geo-F out")
    p.add_argument("--f-max-K", type=int, default=400,
                   help="table: LR-Geo-F only up to this K (its Geo-Ind rows grow with the LR set squared)")
    p.add_argument("--K", type=int, nargs="+", default=None)
    p.add_argument("--users", type=int, default=4)
    p.add_argument("--users-list", type=int, nargs="+", default=[2, 4, 6, 8, 10])
    p.add_argument("--reps", type=int, default=3)
    add_eps_cell(p)
    p.add_argument("--cap", type=float, default=1800.0, help="seconds per baseline")
    p.add_argument("--baselines", nargs="*", default=["lp", "constopt", "laplace", "expmech"])
    p.add_argument("--cells", type=float, nargs="*", default=[1 / 24, 1 / 12, 1 / 6, 1 / 4])
    p.add_argument("--cell-km", type=float, nargs="*", default=[0.05, 0.1, 0.15, 0.2, 0.275],
                   help="paper settings: reference table cell sizes (km) for Figures 10(b) and 13")
    p.add_argument("--Gamma-km", type=float, nargs="*", default=[10.0, 20.0, 30.0, 40.0, 50.0],
                   help="paper settings: LR distance thresholds (km) for Figure 10(a)")
    p.add_argument("--Gamma-cells", type=float, nargs="*", default=[1.5, 2.5, 3.5, 5.0],
                   help="scaled settings: LR distance thresholds (cells) for Figure 10(a)")
    p.add_argument("--hide", type=float, nargs="*", default=[0.0, 0.5, 1.0], help="remedy: hide as a share of Gamma")
    a = output_args(p).parse_args(argv)
    settle_eps_cell(a)
    if a.K is None:
        a.K = {"table": [100, 200, 300, 400], "scaling": [100, 400, 800, 1200, 1600], "privacy": [400],
               "remedy": [400], "bounds": [400], "relaxed": [100, 400]}[a.part]
    for K in a.K:
        if K not in SHAPES:
            sys.exit(f"K must be one of {sorted(SHAPES)}")
    return a


def main() -> None:
    a = parse_args()
    {"table": part_table, "scaling": part_scaling, "privacy": part_privacy, "remedy": part_remedy,
     "bounds": part_bounds, "relaxed": part_relaxed}[a.part](a)


if __name__ == "__main__":
    main()
