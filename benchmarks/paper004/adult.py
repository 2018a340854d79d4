"""Paper 004 on Adult: Figures 3, 5, 7 and 15, the ablation of the improved variant, its scaling
to 14 columns, and the error decomposition (noise scales).

    python -m benchmarks.paper004.adult --figure 3  [--reps 10] [--pair-reps 3]
    python -m benchmarks.paper004.adult --figure 5  [--reps 10] [--sets 5] [--epsilon 0.1] [--decompose]
    python -m benchmarks.paper004.adult --figure 7  [--reps 10] [--query-columns 2] [--sizes 7,14]
    python -m benchmarks.paper004.adult --figure 7causes [--reps 5]
    python -m benchmarks.paper004.adult --figure 15 [--reps 10]
    python -m benchmarks.paper004.adult --figure ablation [--reps 5]
    python -m benchmarks.paper004.adult --figure leave-one-out [--reps 5]
    python -m benchmarks.paper004.adult --figure scale [--reps 3] [--quadtree] [--tables 0,1,2]
    python -m benchmarks.paper004.adult --figure decomposition [--reps 10]

Both RIPOST variants run in every figure, labelled ``ripost (paper)`` (Algorithms 1-3 as
published, ``variant='paper'``) and ``ripost (improved)`` (``variant='improved'``, the
library's default; its departures are named in docs/views.md). Every cell: 3,000 random range
queries (each restricting ``--query-columns`` columns, widths and positions uniform: HDPView's
generator, which the paper's experiments reuse), one workload per tensor, ``--reps``
independent builds per method on seeded numpy noise (``scale`` times the secure OpenDP path);
RMSE mean and standard deviation, and R-RMSE = RMSE / RMSE of the reference on the same
workload (the paper's definition, section 6.1; the reference is RIPOST as published unless
the table says otherwise). Epsilon 0.1 unless ``--epsilon``.
"""

from __future__ import annotations

import argparse
import itertools
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from certdp.experiments.instances import data_dir

from .._common import output_args, write_table

if TYPE_CHECKING:
    from certdp.views import BlockView

DATA = data_dir() / "adult"
FIG5_COLUMNS = ("age", "workclass", "education", "marital-status", "race", "sex", "hours-per-week")
FIG7_ORDER = ("age", "workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
              "hours-per-week", "income", "education-num", "native-country", "capital-gain", "capital-loss")
PAPER, IMPROVED = "ripost (paper)", "ripost (improved)"
SPECS: dict[str, tuple[str, dict[str, Any]]] = {PAPER: ("ripost", {"variant": "paper"}), IMPROVED: ("ripost", {"variant": "improved"}),
         "hdpview": ("hdpview", {}), "privtree": ("privtree", {}),
         "privtree (binary)": ("privtree", {"fanout": "binary"}),
         "identity": ("identity", {}),
         "hdmm": ("hdmm", {}), "dawa": ("dawa", {}), "privbayes": ("privbayes", {}), "mst": ("mst", {}),
         "aim": ("aim", {})}
#: The ablation: Algorithms 1-3, then the improved variant's departures added one at a time.
ABLATION: list[tuple[str, dict[str, Any]]] = [
    ("paper (Algorithms 1-3)", {"variant": "paper"}),
    ("+ leaves take their path's rest", {"variant": "paper", "leaf_budget": "rest"}),
    ("+ biased phase-2 test", {"variant": "paper", "leaf_budget": "rest", "phase2_test": "biased"}),
    ("+ phase-2 cuts at midpoints", {"variant": "paper", "leaf_budget": "rest", "phase2_test": "biased",
                                     "phase2_cuts": "midpoints"}),
    ("+ PrivTree phase 1", {"variant": "paper", "leaf_budget": "rest", "phase2_test": "biased",
                            "phase2_cuts": "midpoints", "phase1": "privtree"}),
    ("+ shares alpha 0.5, gamma 0.5, beta 0.9 (= improved)", {"variant": "improved"})]
#: The improved variant with each departure taken back alone (is each one still worth it?).
LEAVE_ONE_OUT: list[tuple[str, dict[str, Any]]] = [
    ("improved", {"variant": "improved"}),
    ("improved, fixed leaves", {"variant": "improved", "leaf_budget": "fixed"}),
    ("improved, Algorithm 2's phase-2 test", {"variant": "improved", "phase2_test": "series"}),
    ("improved, Algorithm 3 over every cut in phase 2", {"variant": "improved", "phase2_cuts": "all"}),
    ("improved, Algorithms 2-3 as phase 1", {"variant": "improved", "phase1": "paper"}),
    ("improved, the paper's shares", {"variant": "improved", "alpha": 0.3, "gamma": 0.9, "beta": 0.4})]


def provenance(labels=(PAPER, IMPROVED)) -> list[str]:
    """Notes every results file carries: what each RIPOST label ran (the commit is in the header
    ``write_table`` writes)."""
    out = []
    if PAPER in labels:
        out.append("ripost (paper): variant='paper', Algorithms 1-3 as published (alpha 0.3, gamma 0.9, beta 0.4, "
                   "k = os = 4, fixed leaves)")
    if IMPROVED in labels:
        out.append("ripost (improved): variant='improved' (alpha 0.5, gamma 0.5, beta 0.9; rest leaves, PrivTree "
                   "phase 1 halving 2 axes per split, biased phase-2 test, midpoint cuts; docs/views.md)")
    return out


def load():
    from certdp.views import adult

    return adult.read(DATA / "adult.data"), adult.domains(DATA / "adult.names")


def tensor_of(df, doms, cols):
    from certdp.views import CountTensor

    return CountTensor.from_frame(df, list(cols), {c: doms[c] for c in cols}, overflow="bin")


def run(t, labels, reps, seed, qcols, eps, decompose=None):
    """Each labelled method ``reps`` times on one workload (the same seed draws the same
    workload for every label); returns {label: CompareRow}. ``decompose`` ({label: None}) is
    filled with the mean ``decomposed_rmse`` of each of its labels' builds, the same builds."""
    from certdp.experiments.views import compare_views

    out = {}
    for label in labels:
        method, params = SPECS[label]
        parts: list[tuple[float, float, float]] = []
        rows, _, _ = compare_views(t, [method], eps, 3000, qcols, reps, np.random.default_rng(seed),
                                   {method: params},
                                   on_view=(lambda m, v, w, truth: parts.append(decomposed_rmse(v, t, w, truth)))
                                   if decompose is not None and label in decompose else None)
        out[label] = rows[0]
        if parts:
            decompose[label] = np.mean(parts, axis=0)
    return out


def uniform_rmse(t, qcols, seed) -> float:
    """RMSE of the view that spreads the true total uniformly over the domain (not private: the
    reference for how much of the queries' structure a method captures at all)."""
    from certdp.views import Workload, rmse, true_answers
    from certdp.views.view import answer_boxes

    w = Workload.random(t.shape, 3000, min(qcols, len(t.shape)), np.random.default_rng(seed))
    d = len(t.shape)
    return rmse(answer_boxes(np.zeros((1, d), int), np.asarray([t.shape]), np.array([float(t.total)]), t.shape, w),
                true_answers(t, w))


def figure5(a, df, doms):
    """Figure 5 at ``--epsilon``: both RIPOST variants and ``--methods``; R-RMSE against RIPOST
    as published. A method that materialises the domain is left out ("-") where the domain is
    above its limit (``certdp.views.build.DENSE_LIMITS``)."""
    from certdp.views.build import DENSE_LIMITS

    rng = np.random.default_rng(a.seed)
    labels = [PAPER, IMPROVED, *(a.methods or "hdpview,privtree,privbayes").split(",")]
    table, raw = [], []
    per: dict[str, list[tuple[int, float, float]]] = {m: [] for m in labels}   # (columns, R-RMSE, seconds)
    parts: list[str] = []                                                      # --decompose: table rows
    for size in range(2, 7):
        combos = list(itertools.combinations(FIG5_COLUMNS, size))
        for ci in sorted(rng.choice(len(combos), size=min(a.sets, len(combos)), replace=False)):
            cols = combos[ci]
            t = tensor_of(df, doms, cols)
            ran = [m for m in labels if t.domain_size <= DENSE_LIMITS.get(SPECS[m][0], float("inf"))]
            parted: dict[str, Any] = {m: None for m in ran if SPECS[m][0] in BLOCK_METHODS} if a.decompose else {}
            res = run(t, ran, a.reps, a.seed + int(ci), a.query_columns, a.epsilon, decompose=parted)
            base = res[PAPER].rmse_mean
            raw.append({"size": size, "columns": cols, "cells": float(t.domain_size),
                        **{m: r.as_dict() for m, r in res.items()}})
            for m, r in res.items():
                per[m].append((size, r.rmse_mean / base, r.seconds_mean))
            table.append([size, ",".join(cols), f"{t.domain_size:.3g}",
                          *[f"{res[m].rmse_mean:.4g} (x{res[m].rmse_mean / base:.2f})" if m in res else "-"
                            for m in labels]])
            print(table[-1], flush=True)
            for m, d in parted.items():
                raw[-1][m].update({"rmse_aggregation": d[1], "rmse_leaf_noise": d[2]})
                parts.append(f"| {size} | {','.join(cols)} | {m} | {d[0]:.4g} | {d[1]:.4g} | {d[2]:.4g} |")

    def mean(xs: list[float], form: str) -> str:
        return format(float(np.mean(xs)), form) if xs else "-"

    summary = [[s, *[mean([r for z, r, _ in per[m] if s in ('all', z)], ".2f") for m in labels]]
               for s in [*range(2, 7), "all"]]
    wins = ["sets where ripost (paper) is better", *[f"{sum(r > 1 for _, r, _ in per[m])}/{len(per[m])}"
                                                      for m in labels]]
    secs = ["build s (mean)", *[mean([x for _, _, x in per[m]], ".3g") for m in labels]]
    tag = f"_eps{a.epsilon:g}" if a.epsilon != 0.1 else ""
    write_table(a.name or f"ripost_fig5{tag}",
                f"Paper 004 Figure 5: Adult (adult.data), 2-6 of seven columns, eps {a.epsilon:g}, "
                f"{a.reps} reps, {a.query_columns}-column range queries",
                ["columns", "set", "cells", *[f"{m} RMSE (R-RMSE)" for m in labels]], table,
                notes=[*provenance(), "R-RMSE = RMSE / the RMSE of ripost (paper) on the same workload.",
                       "Paper 004 Figure 5 (values not in its text): RIPOST best on every column count, HDPView "
                       "closest, PrivTree worse than both, PrivBayes and P3GM far behind.", "",
                       "Mean R-RMSE per number of columns:", "",
                       "| columns | " + " | ".join(labels) + " |", "|" + "---|" * (len(labels) + 1),
                       *["| " + " | ".join(map(str, row)) + " |" for row in summary + [wins, secs]],
                       *(["", "Error decomposition (--decompose): the same builds (same seeds, same workload) of each "
                          "method whose view is a partition, RMSE, RMSE with exact leaf sums (aggregation only), "
                          "RMSE of the leaf noise alone, means over the reps:", "",
                          "| columns | set | method | RMSE | aggregation | leaf noise |", "|---|---|---|---|---|---|",
                          *parts] if a.decompose else [])],
                raw=raw, args=a)


#: Methods whose view partitions the domain into blocks (``decomposed_rmse`` reads their leaves).
BLOCK_METHODS = ("ripost", "hdpview", "privtree")


def figure7(a, df, doms):
    """Figure 7: the first 7-14 columns of FIG7_ORDER, RIPOST (both) against HDPView and
    PrivTree, with the uniform view as the reference of no information."""
    labels = [PAPER, IMPROVED, *(a.methods or "hdpview,privtree").split(",")]
    table, raw = [], []
    sizes = list(range(7, 15) if a.sizes is None else map(int, a.sizes.split(",")))
    span = f"{min(sizes)}-{max(sizes)}" if len(sizes) > 1 else f"{sizes[0]}"
    for size in sizes:
        cols = FIG7_ORDER[:size]
        t = tensor_of(df, doms, cols)
        res = run(t, labels, a.reps, a.seed + size, a.query_columns, a.epsilon)
        uni = uniform_rmse(t, a.query_columns, a.seed + size)
        base = res[PAPER].rmse_mean
        raw.append({"size": size, "columns": cols, "uniform": uni, **{m: r.as_dict() for m, r in res.items()}})
        table.append([size, f"{t.domain_size:.3g}", f"{uni:.4g}", *[
            f"{res[m].rmse_mean:.4g} ± {res[m].rmse_std:.2g} (x{res[m].rmse_mean / base:.2f}, "
            f"{res[m].rmse_mean / uni:.2f} of uniform), {res[m].blocks_mean:.0f} blocks, {res[m].seconds_mean:.2f} s"
            for m in labels]])
        print(table[-1], flush=True)
    write_table(a.name or f"ripost_fig7_q{a.query_columns}" + (f"_eps{a.epsilon:g}" if a.epsilon != 0.1 else ""),
                f"Paper 004 Figure 7: Adult (adult.data), {span} columns, eps {a.epsilon:g}, {a.reps} reps, "
                f"{a.query_columns}-column range queries",
                ["columns", "cells", "uniform view RMSE",
                 *[f"{m}: RMSE (R-RMSE vs ripost (paper), share of uniform), blocks, build s" for m in labels]],
                table, notes=[*provenance(), f"Columns, in order: {', '.join(FIG7_ORDER)} (the first n); the paper "
                              "does not say which columns it adds.",
                              "uniform view: the true total spread evenly over the domain (not private), the "
                              "error of a view that knows nothing but the count."], raw=raw, args=a)


def figure7_causes(a, df, doms):
    """Why RIPOST trails on 7-14 columns: at 7 and 14 columns, each method's RMSE split into
    aggregation (exact leaf sums) and leaf noise, on queries that touch capital-gain or
    capital-loss and on the others, for adult.data (the data of every other figure here) and
    for adult.data with adult.test (the 48,842 rows of the paper's preprocessing)."""
    import pandas as pd

    from certdp.views import Workload, adult, build_view, true_answers

    both = pd.concat([df, adult.read(DATA / "adult.test")], ignore_index=True)
    table: list[list[Any]] = []
    raw: list[dict[str, Any]] = []

    def save():                                       # after each table: a run stopped early keeps it
        write_table("ripost_fig7_causes", f"Paper 004 Figure 7, causes: Adult 7 and 14 columns, eps {a.epsilon:g}, "
                    f"{a.reps} reps, 2-column range queries",
                    ["data", "columns", "uniform view RMSE", "method", "RMSE", "RMSE, exact leaf sums",
                     "RMSE of leaf noise",
                     "blocks", "RMSE, queries on capital-gain/loss", "RMSE, other queries"], table,
                    notes=[*provenance(), f"Columns: the first 7 or 14 of {', '.join(FIG7_ORDER)}."], raw=raw, args=a)

    for data_name, frame in (("adult.data", df), ("adult.data + adult.test", both)):
        for size in (7, 14):
            cols = FIG7_ORDER[:size]
            t = tensor_of(frame, doms, cols)
            w = Workload.random(t.shape, 3000, 2, np.random.default_rng(a.seed + size))
            truth = true_answers(t, w)
            skew = [cols.index(c) for c in ("capital-gain", "capital-loss") if c in cols]
            touch = np.zeros(w.n_queries, bool)
            for c in skew:
                touch |= (w.lo[:, c] > 0) | (w.hi[:, c] < t.shape[c])
            uni = uniform_rmse(t, 2, a.seed + size)
            for label in (PAPER, IMPROVED, "hdpview", "privtree"):
                method, params = SPECS[label]
                res = []
                for r in range(a.reps):
                    v = build_view(t, method, a.epsilon, a.seed + r, **params)
                    ans = v.estimates(w)
                    err = (ans - truth) ** 2
                    res.append((*decomposed_rmse(v, t, w, truth), v.n_blocks,
                                np.sqrt(err[touch].mean()) if touch.any() else np.nan, np.sqrt(err[~touch].mean())))
                m = np.mean(res, axis=0)
                table.append([data_name, size, f"{uni:.4g}", label, *[f"{x:.4g}" for x in m[:3]], f"{m[3]:.0f}",
                              f"{m[4]:.4g}" if touch.any() else "-", f"{m[5]:.4g}"])
                raw.append({"data": data_name, "columns": size, "uniform": uni, "method": label,
                            "rmse": m[0], "rmse_aggregation": m[1], "rmse_leaf_noise": m[2], "blocks": m[3],
                            "rmse_capital_queries": m[4], "rmse_other_queries": m[5],
                            "share_capital_queries": float(touch.mean())})
                print(table[-1], flush=True)
            save()


def decomposed_rmse(v, t, w, truth):
    """RMSE of the view, of the same leaves with exact sums (aggregation only), and of the leaf
    noise alone (evaluation only: reads the true data)."""
    from certdp.experiments.views import leaf_truth
    from certdp.views import rmse
    from certdp.views.view import answer_boxes

    sums = leaf_truth(v, t)[0]
    return (rmse(v.estimates(w), truth), rmse(answer_boxes(v.lo, v.hi, sums, t.shape, w), truth),
            rmse(answer_boxes(v.lo, v.hi, v.values - sums, t.shape, w), np.zeros_like(truth)))


def figure15(a, df, doms):
    """Figure 15 for each variant around its own defaults: RMSE, blocks, and the RMSE split
    into aggregation (exact leaf sums) and leaf noise, the measured cause of the trends."""
    from certdp.views import Workload, build_view, true_answers

    t = tensor_of(df, doms, ("age", "hours-per-week"))
    w = Workload.random(t.shape, 3000, 2, np.random.default_rng(a.seed))
    truth = true_answers(t, w)
    grid = [("epsilon", v) for v in (0.05, 0.1, 0.2, 0.5, 1.0)] + \
           [("alpha", v) for v in (0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 0.9)] + \
           [("gamma", v) for v in (0.1, 0.3, 0.5, 0.7, 0.9)] + \
           [("beta", v) for v in (0.1, 0.3, 0.4, 0.5, 0.7, 0.9)]
    table, raw = [], []
    for label in (PAPER, IMPROVED):
        variant = SPECS[label][1]["variant"]
        for name, val in grid:
            kw: dict[str, Any] = {} if name == "epsilon" else {name: val}
            eps = val if name == "epsilon" else 0.1
            res = np.asarray([(*decomposed_rmse(v, t, w, truth), v.n_blocks, v.params["stats"]["blocks_phase1"])
                              for v in (build_view(t, "ripost", eps, a.seed + r, variant=variant, **kw)
                                        for r in range(a.reps))])
            m, sd = res.mean(axis=0), res.std(axis=0)
            table.append([label, name, val, f"{m[0]:.4g} ± {sd[0]:.2g}", f"{m[1]:.4g}", f"{m[2]:.4g}",
                          f"{m[3]:.0f} ± {sd[3]:.0f}", f"{m[4]:.0f}"])
            raw.append({"variant": variant, "param": name, "value": val, "rmse": m[0], "rmse_sd": sd[0],
                        "rmse_aggregation": m[1], "rmse_leaf_noise": m[2], "blocks": m[3], "blocks_phase1": m[4]})
            print(table[-1], flush=True)
    write_table("ripost_fig15", f"Paper 004 Figure 15: RIPOST's sensitivity, Adult (age, hours-per-week), "
                f"{a.reps} paired reps (seed r for every value), one parameter varied at a time around each "
                "variant's defaults (eps 0.1)",
                ["variant", "parameter", "value", "RMSE", "RMSE, exact leaf sums (aggregation)",
                 "RMSE of the leaf noise", "blocks", "phase-1 blocks"], table,
                notes=[*provenance(), "Paper 004 (Figure 15 and section 6.3): RMSE falls with epsilon; best alpha "
                       "0.2-0.4 (RMSE grows with alpha through leaf noise); RMSE falls as gamma grows; beta "
                       "without a clear trend."], raw=raw, args=a)


KINDS = ("ae_positive", "ae_positive_of_tested", "single_cell", "empty", "uniform")


def block_view(t, method: str, eps: float, seed: int | np.random.Generator, **params: Any) -> BlockView:
    """``build_view`` of a method whose view is a partition of the domain into blocks (RIPOST,
    HDPView, PrivTree), the only views whose leaves these measures read."""
    from certdp.views import BlockView, build_view

    v = build_view(t, method, eps, seed, **params)
    if not isinstance(v, BlockView):
        raise TypeError(f"{method} does not partition the domain into blocks: its leaves cannot be measured")
    return v


def convergence(t, label, reps, seed, eps=0.1, **extra):
    """Mean leaf kinds (``leaf_kinds``) of ``reps`` builds of one labelled method, the sd of the
    AE > 0 share, and the mean number of leaves."""
    from certdp.experiments.views import leaf_kinds

    method, params = SPECS[label]
    runs = []
    for r in range(reps):
        v = block_view(t, method, eps, seed + r, **params, **extra)
        runs.append([*(leaf_kinds(v, t)[k] for k in KINDS), v.n_blocks])
    m = np.mean(runs, axis=0)
    return {**dict(zip(KINDS, m[:5])), "sd": float(np.std(np.asarray(runs)[:, 0])), "blocks": float(m[5])}


def paper_rows(df):
    """adult.data with adult.test: the 48,842 rows of HDPView's Adult preprocessing, which the
    paper's Table 2 domain (8.9 x 10^18 cells over 15 columns, '?' a value) identifies."""
    import pandas as pd

    from certdp.views import adult

    return pd.concat([df, adult.read(DATA / "adult.test")], ignore_index=True)


def figure3(a, df, doms):
    """Figure 3 (share of leaves with AE > 0) on age x hours-per-week for both row sets, each
    leaf kind beside it; then the readings the paper leaves open: every other pair of columns,
    PrivTree's fanout, RIPOST's series (k = os), and the budget PrivTree would need."""
    from certdp.views.adult import COLUMNS

    both = paper_rows(df)
    labels = (PAPER, IMPROVED, "hdpview", "privtree")
    table: list[list[Any]] = []
    raw: dict[str, list[dict[str, Any]]] = {"main": [], "pairs": [], "readings": []}
    for data_name, frame in (("adult.data + adult.test", both), ("adult.data", df)):
        t = tensor_of(frame, doms, ("age", "hours-per-week"))
        for label in labels:
            c = convergence(t, label, a.reps, a.seed)
            raw["main"].append({"data": data_name, "method": label, **c})
            table.append([data_name, label, f"{c['ae_positive']:.3f}", f"{c['sd']:.3f}",
                          *[f"{c[k]:.3f}" for k in KINDS[1:]], f"{c['blocks']:.0f}"])
            print(table[-1], flush=True)
    t = tensor_of(both, doms, ("age", "hours-per-week"))
    readings: list[tuple[str, str, dict[str, Any], float]] = [
        ("privtree", "fanout='binary' (halve one axis per split)", {"fanout": "binary"}, 0.1),
        *[(PAPER, f"k = os = {k}", {"k": k, "os": k}, 0.1) for k in (1, 2, 8, 16)],
        *[("privtree", f"epsilon {e:g}", {}, e) for e in (0.001, 0.003, 0.01, 0.03)]]
    lines = []
    for label, what, extra, eps in readings:
        c = convergence(t, label, a.reps, a.seed, eps, **extra)
        raw["readings"].append({"method": label, "reading": what, "epsilon": eps, **c})
        lines.append(f"| {label} | {what} | {c['ae_positive']:.3f} | {c['ae_positive_of_tested']:.3f} | "
                     f"{c['single_cell']:.3f} | {c['blocks']:.0f} |")
        print(lines[-1], flush=True)
    for cols in itertools.combinations(COLUMNS, 2):
        tp = tensor_of(both, doms, cols)
        row = {"columns": cols, "shape": list(tp.shape),
               **{label: convergence(tp, label, a.pair_reps, a.seed) for label in labels}}
        raw["pairs"].append(row)
        print(cols, *[f"{row[m]['ae_positive']:.2f}" for m in labels], flush=True)
    pairs = raw["pairs"]
    share = {m: np.asarray([p[m]["ae_positive"] for p in pairs]) for m in labels}
    tested = {m: np.asarray([p[m]["ae_positive_of_tested"] for p in pairs]) for m in labels}
    order = (share["privtree"] > share["hdpview"]) & (share["hdpview"] > share[PAPER])
    order_t = (tested["privtree"] > tested["hdpview"]) & (tested["hdpview"] > tested[PAPER])
    dev = np.max(np.abs(np.stack([share["privtree"] - 0.92, share["hdpview"] - 0.63, share[PAPER] - 0.29])), axis=0)
    best = int(np.argmin(dev))
    write_table("ripost_fig3", f"Paper 004 Figure 3: share of leaves that converged with AE > 0, Adult "
                f"(age, hours-per-week), eps 0.1, {a.reps} reps, and the readings the paper leaves open",
                ["data", "method", "share AE > 0", "sd", "AE > 0 among leaves of > 1 cell", "single-cell leaves",
                 "empty leaves", "uniform leaves", "blocks"], table,
                notes=[*provenance(), "Paper (eps 0.1, 'a 2D-tensor created using the dataset Adult', columns not "
                       "named): PrivTree 92%, HDPView 63%, RIPOST 29%. Competitors as in HDPView's published code "
                       "(PrivTree: theta 0, fanout 2^d, eps/2 tree and eps/2 leaves; HDPView: ratio 0.9, "
                       "alpha 1.6, beta 1.2, gamma 0.9).",
                       "Leaf kinds are shares of all leaves; a single-cell leaf has AE = 0 by definition.", "",
                       f"Readings on adult.data + adult.test, age x hours-per-week, {a.reps} reps:", "",
                       "| method | reading | share AE > 0 | AE > 0 among leaves of > 1 cell | single-cell leaves | "
                       "blocks |", "|---|---|---|---|---|---|", *lines, "",
                       f"Every pair of the 15 columns ({len(pairs)} tensors, adult.data + adult.test, "
                       f"{a.pair_reps} reps each), share AE > 0:", "",
                       "| method | median | min | max | median among leaves of > 1 cell |", "|---|---|---|---|---|",
                       *[f"| {m} | {np.median(share[m]):.2f} | {share[m].min():.2f} | {share[m].max():.2f} | "
                         f"{np.median(tested[m]):.2f} |" for m in labels], "",
                       f"The paper's order PrivTree > HDPView > RIPOST (paper): {int(order.sum())} of {len(pairs)} "
                       f"pairs on all leaves, {int(order_t.sum())} on leaves of > 1 cell; PrivTree above 0.80 on "
                       f"{int(np.sum(share['privtree'] > 0.8))}. Closest pair to (0.92, 0.63, 0.29): "
                       f"{' x '.join(pairs[best]['columns'])} ({share['privtree'][best]:.2f}, "
                       f"{share['hdpview'][best]:.2f}, {share[PAPER][best]:.2f}; largest deviation "
                       f"{dev[best]:.2f})."], raw=raw, args=a)


ABLATION_SETS = [("age", "hours-per-week"), ("age", "education", "sex"),
                 ("workclass", "education", "marital-status", "race"), FIG5_COLUMNS[:6], FIG7_ORDER[:10]]


def ablation(a, df, doms):
    """The paper's algorithm, then the improved variant's departures added one at a time
    (``--figure ablation``), or the improved variant with each taken back alone (``--figure
    leave-one-out``); paired seeds, RMSE ratio to the first row on the same workload, build
    seconds."""
    from certdp.views import Workload, build_view, rmse, true_answers

    steps = ABLATION if a.figure == "ablation" else LEAVE_ONE_OUT

    table, raw = [], []
    ratios: dict[tuple[float, str], list[float]] = {}
    for cols in ABLATION_SETS:
        t = tensor_of(df, doms, cols)
        w = Workload.random(t.shape, 3000, 2, np.random.default_rng(a.seed))
        truth = true_answers(t, w)
        for eps in (0.1, 1.0):
            base = None
            for label, kw in steps:
                errs, secs, blocks = [], [], []
                for r in range(a.reps):
                    t0 = time.perf_counter()
                    v = build_view(t, "ripost", eps, a.seed + r, **kw)
                    secs.append(time.perf_counter() - t0)
                    errs.append(rmse(v.estimates(w), truth))
                    blocks.append(v.n_blocks)
                e = float(np.mean(errs))
                base = e if base is None else base
                ratios.setdefault((eps, label), []).append(e / base)
                table.append([len(cols), eps, label, f"{e:.4g} ± {np.std(errs):.2g}", f"{e / base:.2f}",
                              f"{np.mean(blocks):.0f}", f"{np.mean(secs):.2f}"])
                raw.append({"columns": cols, "epsilon": eps, "step": label, "params": kw, "rmse": e,
                            "rmse_sd": float(np.std(errs)), "blocks": float(np.mean(blocks)),
                            "seconds": float(np.mean(secs))})
                print(table[-1], flush=True)
    summary = [f"| {eps:g} | {label} | {np.median(ratios[(eps, label)]):.2f} | {max(ratios[(eps, label)]):.2f} |"
               for eps in (0.1, 1.0) for label, _ in steps]
    what = ("the paper's algorithm and the improved variant's departures added one at a time" if steps is ABLATION
            else "the improved variant with each departure taken back alone")
    write_table("ripost_ablation" if steps is ABLATION else "ripost_leave_one_out",
                f"RIPOST: {what}, Adult (adult.data), {a.reps} paired reps, 2-column range queries",
                ["columns", "epsilon", "step", "RMSE", f"RMSE / {steps[0][0]}'s", "blocks", "build s"], table,
                notes=[*provenance(), f"Column sets: {'; '.join(','.join(c) for c in ABLATION_SETS)}.", "",
                       f"RMSE / {steps[0][0]}'s over the column sets (median, worst):", "",
                       "| epsilon | step | median | worst |", "|---|---|---|---|", *summary], raw=raw, args=a)


#: The 14-column tables of ``--figure scale``: (name, columns, with adult.test's rows too).
SCALE_TABLES = [("adult.data", FIG7_ORDER, False), ("adult.data + adult.test", FIG7_ORDER, True),
                ("adult.data, fnlwgt for income", (*FIG7_ORDER[:9], "fnlwgt", *FIG7_ORDER[10:]), False)]


def scale(a, df, doms):
    """Both variants on three 14-column Adult tables at eps 0.1 and 1, ``--reps`` builds each on
    the secure OpenDP path, the published variant first in the same process: seconds, the
    improved variant's time over the published one's (median and worst over the family), blocks,
    tests per phase and the RMSE of 3,000 two-column range queries. Then, on the first table,
    the improved variant with 1 and 3 axes halved per phase-1 split beside its rule (2), and
    with ``--quadtree`` every axis (14: the design whose block count was the limit). The file
    is rewritten after each table and epsilon, so a run stopped early keeps what it measured."""
    import pandas as pd

    from certdp.views import Workload, adult, build_view, rmse, true_answers

    both = pd.concat([df, adult.read(DATA / "adult.test")], ignore_index=True)
    table: list[list[Any]] = []
    raw: list[dict[str, Any]] = []
    ratios: dict[float, list[float]] = {}   # epsilon -> the improved variant's seconds / the paper's
    alternatives = [("improved, 1 axis per split", {"split_axes": 1}),
                    ("improved, 3 axes per split", {"split_axes": 3})]
    if a.quadtree:
        alternatives.append(("improved, every axis per split (quadtree)", {"split_axes": 14}))

    def one(name, t, w, truth, eps, rep, label, extra, base):
        variant = "paper" if label == PAPER else "improved"
        t0 = time.perf_counter()
        v = build_view(t, "ripost", eps, None, variant=variant, **extra)
        s = time.perf_counter() - t0
        st = v.params["stats"]
        e = rmse(v.estimates(w), truth)
        raw.append({"table": name, "epsilon": eps, "rep": rep, "label": label, "seconds": s, "rmse": e,
                    "split_axes": v.params["split_axes"], **st, "spent": v.spent})
        base = s if base is None else base
        table.append([name, eps, rep, label, v.params["split_axes"] or "-", f"{s:.1f}", f"{s / base:.2f}",
                      st["blocks_phase1"], v.n_blocks, st["tests_phase1"], st["tests_phase2"], f"{e:.4g}"])
        print(table[-1], flush=True)
        return s, base

    def save():
        summary = [f"| {eps:g} | {len(r)} | {np.median(r):.3f} | {max(r):.3f} |" for eps, r in ratios.items()]
        write_table("ripost_scale" + (f"_tables{a.tables.replace(',', '-')}" if a.tables else ""),
                    f"RIPOST on 14-column Adult tables: both variants, secure randomness (OpenDP), "
                    f"{a.reps} builds per table and epsilon, the published variant first in the same process",
                    ["table", "epsilon", "rep", "variant", "phase-1 axes per split", "seconds",
                     "/ paper's (same table, eps, rep)", "phase-1 blocks", "leaves", "phase-1 tests", "phase-2 tests",
                     "RMSE"], table,
                    notes=[*provenance(),
                           f"Tables: {'; '.join(f'{n}: {chr(44).join(c)}' for n, c, _ in SCALE_TABLES)}.",
                           "The improved variant's phase 1 halves phase1_axes(shape) = min(2, cuttable columns) axes "
                           "per split (the rule in docs/views.md); the alternatives run once each on the first "
                           "table, after the three tables, their ratio against that table's rep-0 published build.",
                           "Beside other work on 2 shared cores: compare the ratios and the counts, not the seconds.",
                           "", "Improved variant's seconds / the published variant's, same table, epsilon and rep:",
                           "", "| epsilon | builds | median | worst |", "|---|---|---|---|", *summary],
                    raw=raw, args=a)

    chosen = [int(i) for i in a.tables.split(",")] if a.tables else list(range(len(SCALE_TABLES)))
    tensors = []
    for name, cols, with_test in (SCALE_TABLES[i] for i in chosen):
        t = tensor_of(both if with_test else df, doms, cols)
        w = Workload.random(t.shape, 3000, 2, np.random.default_rng(a.seed))
        tensors.append((name, t, w, true_answers(t, w)))
    first_paper: dict[float, float] = {}             # eps -> the first table's first published build, s
    for name, t, w, truth in tensors:
        for eps in (0.1, 1.0):
            for rep in range(a.reps):
                base = one(name, t, w, truth, eps, rep, PAPER, {}, None)[1]
                first_paper.setdefault(eps, base)
                ratios.setdefault(eps, []).append(one(name, t, w, truth, eps, rep, IMPROVED, {}, base)[0] / base)
            save()
    if chosen[0] != 0:
        return
    name, t, w, truth = tensors[0]
    for eps in (0.1, 1.0):
        for label, extra in alternatives:
            if extra["split_axes"] < 14 or eps == 0.1:
                one(name, t, w, truth, eps, 0, label, extra, first_paper[eps])
        save()


def decomposition(a, df, doms):
    """Where each method's error comes from (RMSE, exact leaf sums, leaf noise alone) and the
    convergence tests' Laplace scales by depth for both RIPOST variants."""
    from certdp.views import Workload, true_answers

    t = tensor_of(df, doms, ("age", "hours-per-week"))
    w = Workload.random(t.shape, 3000, 2, np.random.default_rng(a.seed))
    truth = true_answers(t, w)
    table, scales = [], []
    for eps in (0.1, 1.0):
        for label in (PAPER, IMPROVED, "hdpview", "privtree"):
            method, params = SPECS[label]
            res, v = [], None
            for r in range(a.reps):
                v = block_view(t, method, eps, a.seed + r, **params)
                res.append((*decomposed_rmse(v, t, w, truth), v.n_blocks))
            table.append([eps, label, *np.mean(res, axis=0)])
            if method == "ripost":
                assert v is not None   # main() asks for --reps >= 1
                scales += [f"| {eps:g} | {label} | {n['phase']} | {n['depth']} | {n['test_laplace_scale']:.4g} | "
                           f"{n['split_epsilon']:.3g} |" for n in v.params["noise"] if n["depth"] in (1, 2, 5, 10, 20)]
            print(table[-1], flush=True)
    write_table("ripost_error_decomposition", f"Error decomposition, Adult (age, hours-per-week), {a.reps} reps",
                ["epsilon", "method", "RMSE", "RMSE, exact leaf sums (aggregation only)", "RMSE of the leaf noise only",
                 "blocks"], table,
                notes=[*provenance(), "Convergence-test Laplace scale and cut epsilon by phase and depth (RIPOST, from "
                       "the last view's params['noise']; the improved variant's tests are biased and charged once, "
                       "so one scale per phase):", "", "| epsilon | variant | phase | depth | test Laplace scale | "
                       "cut epsilon |", "|---|---|---|---|---|---|", *scales], args=a)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--figure", choices=["3", "5", "7", "7causes", "15", "ablation", "leave-one-out", "scale",
                                           "decomposition"],
                    required=True)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--sets", type=int, default=5, help="figure 5: column sets per number of columns")
    ap.add_argument("--pair-reps", type=int, default=3, help="figure 3: builds per method on each other column pair")
    ap.add_argument("--methods", default=None, help="figures 5 and 7: the competitors (default "
                    "hdpview,privtree,privbayes for 5, hdpview,privtree for 7)")
    ap.add_argument("--decompose", action="store_true", help="figure 5: also split the error of RIPOST, HDPView and "
                    "PrivTree into aggregation and leaf noise")
    ap.add_argument("--sizes", default=None, help="figure 7: numbers of columns (comma-separated; 7-14 by default)")
    ap.add_argument("--name", default=None, help="figures 5 and 7: results file name (default ripost_fig5[_epsE], "
                    "ripost_fig7_qQ[_epsE])")
    ap.add_argument("--query-columns", type=int, default=2)
    ap.add_argument("--seed", type=int, default=2025)
    ap.add_argument("--epsilon", type=float, default=0.1, help="figures 5 and 7: the privacy budget")
    ap.add_argument("--quadtree", action="store_true", help="scale: also the improved variant halving every axis")
    ap.add_argument("--tables", default=None, help="scale: which of SCALE_TABLES (indices, comma-separated; all by "
                    "default; the rule's alternatives run when the first is 0)")
    a = output_args(ap).parse_args()
    if a.reps < 1:
        ap.error("--reps must be at least 1")
    if not (DATA / "adult.data").is_file():
        print(f"skipped: the Adult data is not in {DATA}")
        return
    df, doms = load()
    {"5": figure5, "7": figure7, "7causes": figure7_causes, "15": figure15, "3": figure3, "ablation": ablation,
     "leave-one-out": ablation, "scale": scale,
     "decomposition": decomposition}[a.figure](a, df, doms)


if __name__ == "__main__":
    main()
