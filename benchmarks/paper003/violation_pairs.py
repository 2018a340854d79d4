"""Paper 003's Figure 12 (the Geo-Ind error, Eq. 35, against the number of users) taken apart
per pair of users: which pairs of users can violate Geo-Ind, how often, by how much, and
what decides it.

A Geo-Ind check across users is z_ik <= exp(eps d_ij) z_jk for a row i of one user's LR matrix,
a row j of another's with d_ij <= gamma, and a column k, in both directions
(:func:`certdp.lrgeo.measures.violations`, counted the same way here). Per pair of users a < b
each run records: the distance between the two users' locations (km and location cells), the
overlap of their LR sets, the columns both obfuscation ranges share, the pairs of rows within
gamma (those at distance 0, one location in both LR sets, apart), the checks made, the
violations and the largest error, each also split by the kind of the two entries compared
(free: within r_exp of its row, a value of the user's own subproblem; exp: y'_k h_ik, the
shared exponential part, Eq. 19; exp/exp checks hold by Theorem 4.4), and the worst violation
(its distances and the two entries).

Two designs of the draws, both at 2 / 4 / ... users and ``--reps`` draws:

* ``independent``: the draws of ``tables.py --part privacy`` (``run_round(users=M, seed=rep)``):
  each number of users is a new draw of locations, so its runs reproduce that table's;
* ``nested``: draw r places the largest number of users once (the same locations as the
  independent draw r at that number) and each smaller run keeps its first M users with the
  same LR row orders, so a pair of users stays the same pair at every M and only the other
  users change (they enter the shared y' of the CLR-Geo solve).

    python -m benchmarks.paper003.violation_pairs --dataset helsinki --eps-cell 1 --K 400
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from certdp.lrgeo.measures import VIOLATION_TOLERANCE, violations
from certdp.lrgeo.protocol import LRGeoRound, run_round
from certdp.lrgeo.table import build_table
from certdp.randomness import as_generator

from .._common import output_args, write_table
from .tables import SHAPES, base_world, over_checked, params_for, tag

KINDS = ("free/free", "free/exp", "exp/free", "exp/exp")
DISTANCE_BINS = (0.0, 2.0, 4.0, 6.0, 8.0, np.inf)    # users' distance, location cells


def draw(world, P, M: int, rep: int, design: str, largest: int, table) -> LRGeoRound:
    """One round of ``M`` users for draw ``rep``: a fresh draw (independent), or the first M
    users of the draw of ``largest`` users, with the same random stream (nested)."""
    if design == "independent":
        return run_round(world, P, users=M, seed=rep, table=table)
    rng = as_generator(rep)
    locs = rng.choice(world.K, size=largest, replace=False)
    return run_round(world, P, users=[int(v) for v in locs[:M]], seed=rng, table=table)


def pair_record(rnd: LRGeoRound, a: int, b: int) -> dict[str, Any]:
    """The Geo-Ind checks between users a and b of ``rnd`` (both directions), by kind of entry."""
    w, P = rnd.world, rnd.params
    H, K = w.haversine, w.K
    ua, ub = rnd.users[a], rnd.users[b]
    Za, Zb = rnd.mechanisms[a].matrix, rnd.mechanisms[b].matrix
    D = H[np.ix_(ua.lr, ub.lr)]
    i, j = np.nonzero(D <= P.gamma)
    d = D[i, j]
    rec: dict[str, Any] = {
        "a": a, "b": b, "distance_km": float(H[ua.location, ub.location]),
        "distance_cells": float(H[ua.location, ub.location] / w.cell), "lr_sizes": [ua.n, ub.n],
        "lr_overlap": int(len(np.intersect1d(ua.lr, ub.lr))), "shared_columns": int(len(np.intersect1d(ua.obf, ub.obf))),
        "row_pairs": int(len(i)), "row_pairs_distance0": int(np.count_nonzero(d <= 0)), "checks": 2 * int(len(i)) * K,
        "violations": 0, "violations_distance0": 0, "max_error": 0.0, "errors": [],
        "checks_by_kind": dict.fromkeys(KINDS, 0), "violations_by_kind": dict.fromkeys(KINDS, 0),
        "max_error_by_kind": dict.fromkeys(KINDS, 0.0), "worst": None}
    if len(i) == 0:
        return rec
    f = np.exp(P.epsilon * d)[:, None]
    free_a = H[ua.lr[i]] <= P.r_exp      # (pairs, K): entry of row i of user a is free
    free_b = H[ub.lr[j]] <= P.r_exp
    for X, Y, fx, fy, rx, ry in ((Za[i], Zb[j], free_a, free_b, ua.lr[i], ub.lr[j]),
                                 (Zb[j], Za[i], free_b, free_a, ub.lr[j], ua.lr[i])):
        ex = X - f * Y
        bad = ex > VIOLATION_TOLERANCE
        rec["violations"] += int(bad.sum())
        rec["violations_distance0"] += int(bad[d <= 0].sum())
        rec["errors"].extend(ex[bad].tolist())
        for kind, mask in zip(KINDS, (fx & fy, fx & ~fy, ~fx & fy, ~fx & ~fy)):
            rec["checks_by_kind"][kind] += int(mask.sum())
            rec["violations_by_kind"][kind] += int((bad & mask).sum())
            if (bad & mask).any():
                rec["max_error_by_kind"][kind] = max(rec["max_error_by_kind"][kind], float(ex[bad & mask].max()))
        if bad.any() and float(ex.max()) > rec["max_error"]:
            p, k = np.unravel_index(int(np.argmax(ex)), ex.shape)
            rec["max_error"] = float(ex[p, k])
            rec["worst"] = {"d_rows_km": float(d[p]), "d_row_column_km": float(H[rx[p], k]),
                            "d_other_row_column_km": float(H[ry[p], k]), "z": float(X[p, k]),
                            "z_other": float(Y[p, k]), "column_is_row_location": bool(rx[p] == k)}
    return rec


def user_record(rnd: LRGeoRound, m: int) -> dict[str, Any]:
    """User m's matrix, means over its rows: the free mass (entries within r_exp of the row, the
    part the user's own subproblem sets), the far mass (entries beyond r_obf of the row, y'_k
    itself, set by the shared y' alone) and the own-location entry z_ii."""
    u, Z = rnd.users[m], rnd.mechanisms[m].matrix
    D = rnd.world.haversine[u.lr]
    return {"location": u.location, "lr_size": u.n,
            "free_mass": float(np.mean(np.sum(Z * (D <= rnd.params.r_exp), axis=1))),
            "far_mass": float(np.mean(np.sum(Z * (D > rnd.params.r_obf), axis=1))),
            "own_entry": float(np.mean(Z[np.arange(u.n), u.lr]))}


def run_record(rnd: LRGeoRound, design: str, M: int, rep: int) -> dict[str, Any]:
    """Every pair of users and every user of one round; the pair counts are checked against
    :func:`certdp.lrgeo.measures.violations`, the count the privacy tables report."""
    pairs = [pair_record(rnd, a, b) for a in range(M) for b in range(a + 1, M)]
    v = violations(rnd.world, [u.lr for u in rnd.users], [m.matrix for m in rnd.mechanisms], rnd.params.epsilon,
                   rnd.params.gamma)
    if sum(p["violations"] for p in pairs) != v.cross_violations or sum(p["checks"] for p in pairs) != v.cross_checked:
        raise RuntimeError(f"{design} {M} users, draw {rep}: per-pair counts differ from measures.violations")
    summary = v.summary()
    return {"design": design, "users": M, "rep": rep, "locations": [u.location for u in rnd.users],
            "solve_seconds": rnd.seconds["solve"], "status": rnd.info.status,
            "max_error": summary["max_error"], "p99_error": summary["p99_error"],
            "pairs": pairs, "user_matrices": [user_record(rnd, m) for m in range(M)]}


def _list(values) -> str:
    return " / ".join("-" if v is None else f"{v:.3g}" for v in values)


def summary_row(runs: list[dict]) -> list[Any]:
    """One design and number of users over its draws."""
    pairs = [p for r in runs for p in r["pairs"]]
    near = [p for p in pairs if p["checks"]]
    errors = [e for p in pairs for e in p["errors"]]
    viol = [p for p in pairs if p["violations"]]
    return [runs[0]["design"], runs[0]["users"], len(pairs) / len(runs), len(near) / len(runs),
            float(np.mean([p["lr_overlap"] for p in near])) if near else None,
            sum(p["checks"] for p in pairs) / len(runs), sum(p["violations"] for p in pairs) / len(runs),
            _list(r["max_error"] for r in runs), _list(r["p99_error"] for r in runs),
            over_checked(runs, "max_error", np.max), over_checked(runs, "p99_error", np.mean),
            float(np.quantile(errors, 0.99)) if errors else None,
            float(np.mean([p["max_error"] for p in viol])) if viol else None,
            float(np.mean([u["free_mass"] for r in runs for u in r["user_matrices"]])),
            float(np.mean([u["far_mass"] for r in runs for u in r["user_matrices"]]))]


def pooled(runs: list[dict]) -> list[dict]:
    """The runs the pooled tables count: the independent draws when there are any (the nested
    draws repeat their users at every M, and their largest M is the independent draw itself)."""
    return [r for r in runs if r["design"] == "independent"] or runs


def _bin(p: dict) -> int:
    return int(np.searchsorted(DISTANCE_BINS, p["distance_cells"], side="right")) - 1


def distance_rows(runs: list[dict], users_list: list[int]) -> list[str]:
    """Pairs of users by the distance between their locations (pooled runs), as table rows;
    then the mean largest error of the violated pairs of each distance at each number of users."""
    pairs = [p for r in pooled(runs) for p in r["pairs"]]
    out = ["| users' distance (cells) | pairs | pairs within gamma | mean LR overlap | mean shared columns | "
           "mean checks | violations per pair | pairs violated | mean largest error (violated pairs) | largest |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for b, (lo, hi) in enumerate(zip(DISTANCE_BINS[:-1], DISTANCE_BINS[1:])):
        ps = [p for p in pairs if _bin(p) == b]
        if not ps:
            continue
        vs = [p for p in ps if p["violations"]]
        out.append("| " + " | ".join([f"{lo:g}-{hi:g}", str(len(ps)), str(sum(1 for p in ps if p["checks"])),
                                       f"{np.mean([p['lr_overlap'] for p in ps]):.3g}",
                                       f"{np.mean([p['shared_columns'] for p in ps]):.3g}",
                                       f"{np.mean([p['checks'] for p in ps]):.4g}",
                                       f"{np.mean([p['violations'] for p in ps]):.3g}", str(len(vs)),
                                       f"{np.mean([p['max_error'] for p in vs]):.3g}" if vs else "-",
                                       f"{max(p['max_error'] for p in vs):.3g}" if vs else "-"]) + " |")
    out += ["", "Mean largest error of the violated pairs (their number) by distance and number of users:", "",
            "| users' distance (cells) | " + " | ".join(f"{M} users" for M in users_list) + " |",
            "|" + "---|" * (1 + len(users_list))]
    for b, (lo, hi) in enumerate(zip(DISTANCE_BINS[:-1], DISTANCE_BINS[1:])):
        cells = []
        for M in users_list:
            vs = [p for r in pooled(runs) if r["users"] == M for p in r["pairs"] if p["violations"] and _bin(p) == b]
            cells.append(f"{np.mean([p['max_error'] for p in vs]):.3g} ({len(vs)})" if vs else "-")
        if any(c != "-" for c in cells):
            out.append(f"| {lo:g}-{hi:g} | " + " | ".join(cells) + " |")
    return out


def kind_rows(runs: list[dict]) -> list[str]:
    """Checks, violations and the largest error by the kind of the two entries compared (pooled runs)."""
    pairs = [p for r in pooled(runs) for p in r["pairs"]]
    out = ["| entries compared (row i / row j) | checks | violations | largest error |", "|---|---|---|---|"]
    for kind in KINDS:
        out.append(f"| {kind} | {sum(p['checks_by_kind'][kind] for p in pairs)} | "
                   f"{sum(p['violations_by_kind'][kind] for p in pairs)} | "
                   f"{max(p['max_error_by_kind'][kind] for p in pairs):.3g} |")
    return out


def worst_line(runs: list[dict], r_exp: float) -> str:
    """The worst violation of every violated pair (pooled runs): how often its larger entry is
    free, the two entries' means, and how closely the error follows the larger entry."""
    w = [(p["max_error"], p["worst"]) for r in pooled(runs) for p in r["pairs"] if p["worst"]]
    if not w:
        return "No violated pair."
    err = np.array([e for e, _ in w])
    z = np.array([x["z"] for _, x in w])
    free = np.mean([x["d_row_column_km"] <= r_exp for _, x in w])
    corr = float(np.corrcoef(err, z)[0, 1]) if len(w) > 1 else float("nan")
    return (f"The worst violation of each of the {len(w)} violated pairs (independent draws): its larger entry is "
            f"free in {free:.0%} of them; that entry is {z.mean():.3g} on average (largest {z.max():.3g}), the other "
            f"user's entry it is compared with {np.mean([x['z_other'] for _, x in w]):.3g}; the error's correlation "
            f"with the larger entry is {corr:.2f}.")


def nested_rows(runs: list[dict], users_list: list[int]) -> list[str]:
    """Nested design: the largest error of every pair of users that violates at some M, at each M
    (blank where the pair is not yet in the round), and how many of its steps from one M to the
    next lower it."""
    nested = [r for r in runs if r["design"] == "nested"]
    out = ["| draw | pair | distance (cells) | LR overlap | " + " | ".join(f"{M} users" for M in users_list) + " |",
           "|" + "---|" * (4 + len(users_list))]
    steps = lower = 0
    for rep in sorted({r["rep"] for r in nested}):
        by_m = {r["users"]: {(p["a"], p["b"]): p for p in r["pairs"]} for r in nested if r["rep"] == rep}
        keys = sorted({k for ps in by_m.values() for k, p in ps.items() if p["violations"]})
        for key in keys:
            errs = [by_m[M][key]["max_error"] for M in users_list if key in by_m.get(M, {})]
            steps += len(errs) - 1
            lower += sum(1 for e0, e1 in zip(errs, errs[1:]) if e1 < e0)
            first = next(by_m[M][key] for M in users_list if key in by_m.get(M, {}))
            cells = [f"{by_m[M][key]['max_error']:.3g}" if key in by_m.get(M, {}) else "" for M in users_list]
            out.append(f"| {rep} | {key[0]}-{key[1]} | {first['distance_cells']:.2f} | {first['lr_overlap']} | "
                       + " | ".join(cells) + " |")
    return out + ["", f"Of the {steps} steps from one number of users to the next of these pairs, {lower} lower "
                      "the pair's largest error."]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", choices=["helsinki", "gridcity", "romecity"], default="helsinki")
    p.add_argument("--settings", choices=["scaled", "paper"], default="scaled")
    p.add_argument("--eps-cell", type=float, default=1.0)
    p.add_argument("--K", type=int, default=400, choices=sorted(SHAPES))
    p.add_argument("--users-list", type=int, nargs="+", default=[2, 4, 6, 8, 10])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--designs", nargs="+", choices=["independent", "nested"], default=["independent", "nested"])
    a = output_args(p).parse_args()
    w = base_world(a.dataset).block(*SHAPES[a.K])
    P = params_for(w, a)
    table = build_table(w, P.cell, P.table_band)
    largest = max(a.users_list)
    runs: list[dict] = []
    rows: list[list[Any]] = []
    for design in a.designs:
        for M in a.users_list:
            for rep in range(a.reps):
                runs.append(run_record(draw(w, P, M, rep, design, largest, table), design, M, rep))
                print(design, M, rep, runs[-1]["max_error"], runs[-1]["p99_error"], flush=True)
            rows.append(summary_row([r for r in runs if r["design"] == design and r["users"] == M]))
    write_table(f"lrgeo_fig12_pairs_{tag(a)}",
                f"LR-Geo Figure 12 per pair of users on {a.dataset}, K={w.K} (eps {a.eps_cell:g} per cell, "
                f"{a.reps} draws)",
                ["design", "users", "pairs of users", "pairs within gamma", "mean LR overlap (those)", "checks",
                 "violations", "largest error per draw", "p99 per draw", "largest over the draws",
                 "mean p99, draws with checks", "p99 of pooled errors",
                 "mean largest error of violated pairs", "mean free mass per row", "mean far mass per row"], rows,
                notes=[
                    "Per draw and number of users, means over the draws; pairs within gamma: pairs of users with "
                    "a row of one within gamma of a row of the other (only they are checked); checks: both "
                    "directions of every such pair of rows times |V|; violations: excess above "
                    f"{VIOLATION_TOLERANCE:g}; a draw without a check has no error ('-'). The largest over the draws "
                    "and the mean p99 over the draws with checks are the two statistics of `lrgeo_privacy_*.md`.",
                    "Free mass per row: the probability a row puts within r_exp of its own location (entries its "
                    "user's subproblem sets); the rest is the shared exponential part y'_k h_ik, of which the far "
                    "mass is the part beyond r_obf of the row (y'_k itself).",
                    "", "Pairs of users by the distance between their locations (independent draws):", "",
                    *distance_rows(runs, a.users_list), "",
                    "Checks by the kind of the two entries (independent draws; free: within r_exp of its row, "
                    "exp: y'_k h_ik):", "",
                    *kind_rows(runs), "", worst_line(runs, P.r_exp), "",
                    "Nested draws: the largest error of each pair of users that violates at some number of users "
                    "(the same two users, LR sets and row orders at every M; blank: not yet in the round):", "",
                    *nested_rows(runs, a.users_list)], raw=runs, args=a)


if __name__ == "__main__":
    main()
