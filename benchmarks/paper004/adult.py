"""Paper 004 on Adult: Figures 5, 7, 15 and 3 (RIPOST against HDPView, PrivTree, Identity, PrivBayes, MST).

    python -m benchmarks.paper004.adult --figure 5  [--reps 10] [--sets 5]
    python -m benchmarks.paper004.adult --figure 7  [--reps 10]
    python -m benchmarks.paper004.adult --figure 15 [--reps 10]
    python -m benchmarks.paper004.adult --figure 3  [--reps 10]
    python -m benchmarks.paper004.adult --figure build14 [--epsilon 0.1] [--cap 900]
    python -m benchmarks.paper004.adult --figure decomposition   [aggregation error vs leaf noise]
    python -m benchmarks.paper004.adult --figure budget   [leaves: fixed eps_p vs the path's rest]

Every cell: 3,000 random range queries (each restricting --query-columns columns, widths and
positions uniform), one workload per tensor, ``--reps`` independent builds per method; RMSE
mean and standard deviation, and R-RMSE = RMSE / RMSE of RIPOST on the same workload.
Epsilon 0.1 and RIPOST's defaults alpha 0.3, gamma 0.9, beta 0.4 (paper section 6.1); series
k = os = 4; HDPView and PrivTree with their published parameters. Noise is seeded numpy for
the repetitions (reproducible); ``build14`` times the secure OpenDP path.
Figure 5 uses the seven columns below, as the paper's counts of tensors per size (21, 35, 35,
21, 7 = C(7, 2..6)) imply; ``--sets`` of them per size are drawn at random (seeded).
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from certdp.experiments.instances import data_dir

from .._common import output_args, write_table

DATA = data_dir() / "adult"
FIG5_COLUMNS = ("age", "workclass", "education", "marital-status", "race", "sex", "hours-per-week")
FIG7_ORDER = ("age", "workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
              "hours-per-week", "income", "education-num", "native-country", "capital-gain", "capital-loss")
METHODS = ("ripost", "hdpview", "privtree", "identity", "hdmm", "dawa", "privbayes", "mst", "aim")


def load():
    from certdp.views import adult

    return adult.read(DATA / "adult.data"), adult.domains(DATA / "adult.names")


def tensor_of(df, doms, cols):
    from certdp.views import CountTensor

    return CountTensor.from_frame(df, list(cols), {c: doms[c] for c in cols}, overflow="bin")


def compare(t, methods, reps, seed, qcols, eps=0.1, params=None):
    from certdp.experiments.views import compare_views

    rows, _, _ = compare_views(t, methods, eps, 3000, qcols, reps, np.random.default_rng(seed), params)
    return {r.method: r for r in rows}


def figure5(a, df, doms):
    """Figure 5 at ``--epsilon``: every method of METHODS plus RIPOST as published (variant
    'paper') on the same workload; R-RMSE against ``ripost`` (the improved default)."""
    rng = np.random.default_rng(a.seed)
    table, raw = [], []
    names = list(METHODS) + ["ripost (paper)"]
    per_method = {m: [] for m in names}
    for size in range(2, 7):
        combos = list(itertools.combinations(FIG5_COLUMNS, size))
        pick = rng.choice(len(combos), size=min(a.sets, len(combos)), replace=False)
        for ci in sorted(pick):
            cols = combos[ci]
            t = tensor_of(df, doms, cols)
            res = compare(t, METHODS, a.reps, a.seed + ci, a.query_columns, eps=a.epsilon)
            paper = compare(t, ["ripost"], a.reps, a.seed + ci, a.query_columns, eps=a.epsilon,
                            params={"ripost": {"variant": "paper"}})["ripost"]
            res["ripost (paper)"] = paper
            base = res["ripost"].rmse_mean
            rec = {"size": size, "columns": cols, "cells": float(t.domain_size),
                   **{m: r.as_dict() for m, r in res.items()}}
            raw.append(rec)
            for m, r in res.items():
                per_method[m].append((size, r.rmse_mean / base, r.seconds_mean))
            table.append([size, ",".join(cols), f"{t.domain_size:.3g}", *[
                f"{res[m].rmse_mean:.4g} ± {res[m].rmse_std:.2g} (x{res[m].rmse_mean / base:.2f})" if m in res else "-"
                for m in names]])
            print(table[-1], flush=True)
            _write_fig5(table, raw, per_method, names, a)      # after every set: a stopped run keeps its rows


def _write_fig5(table, raw, per_method, names, a) -> None:
    summary = []
    for size in list(range(2, 7)) + ["all"]:
        summary.append([size, *[f"{np.mean([r for s, r, _ in per_method[m] if size in ('all', s)]):.2f}"
                                if any(size in ('all', s) for s, _, _ in per_method[m]) else "-" for m in names]])
    secs = ["build s (mean)", *[f"{np.mean([x for _, _, x in per_method[m]]):.3g}" if per_method[m] else "-"
                                for m in names]]
    wins = ["sets where ripost wins", *[f"{sum(r > 1 for _, r, _ in per_method[m])}/{len(per_method[m])}"
                                        if per_method[m] else "-" for m in names]]
    tag = f"_eps{a.epsilon:g}" if a.epsilon != 0.1 else ""
    write_table(f"ripost_fig5{tag}", f"Paper 004 Figure 5: Adult, 2-6 columns, eps {a.epsilon:g}, {a.reps} reps, "
                f"{a.query_columns}-column range queries",
                ["columns", "set", "cells", *[f"{m} RMSE (R-RMSE)" for m in names]], table,
                notes=["ripost: the improved variant (the default); ripost (paper): Algorithms 1-3 as published. "
                       "R-RMSE = RMSE / ripost's RMSE on the same workload.",
                       "Paper 004 (Figure 5, its values are not in the text): RIPOST best on every column count, "
                       "HDPView closest, PrivTree worse than both.", "",
                       "Average R-RMSE per number of columns, build seconds, and the sets where ripost's RMSE "
                       "is lower:",
                       "", "| columns | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1),
                       *["| " + " | ".join(map(str, row)) + " |" for row in summary + [secs, wins]]],
                raw=raw, args=a)
    _plot_fig5(per_method, names, f"ripost_fig5{tag}", a)


def _plot_fig5(per_method, names, name, a) -> None:
    """R-RMSE against the number of columns, one line per method (PNG beside the table)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
        return
    from .._common import target

    fig, ax = plt.subplots(figsize=(6, 4))
    for m in names:
        pts = [(s, float(np.mean([r for s2, r, _ in per_method[m] if s2 == s]))) for s in range(2, 7)
               if any(s2 == s for s2, _, _ in per_method[m])]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=m)
    ax.set_yscale("log")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("columns")
    ax.set_ylabel("R-RMSE (RMSE / ripost's)")
    ax.set_title(f"Adult, eps {a.epsilon:g}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(target(name, ".png", a), dpi=120)
    plt.close(fig)


def figure7(a, df, doms):
    table, raw = [], []
    methods = ("ripost", "hdpview", "privtree")
    for size in range(7, 15):
        cols = FIG7_ORDER[:size]
        t = tensor_of(df, doms, cols)
        res = compare(t, methods, a.reps, a.seed + size, a.query_columns)
        raw.append({"size": size, "columns": cols, **{m: r.as_dict() for m, r in res.items()}})
        table.append([size, f"{t.domain_size:.3g}", *[
            f"{res[m].rmse_mean:.4g} ± {res[m].rmse_std:.2g} (x{res[m].relative:.2f}), {res[m].blocks_mean:.0f} blocks, "
            f"{res[m].seconds_mean:.2f} s" for m in methods]])
        print(table[-1], flush=True)
    write_table("ripost_fig7", f"Paper 004 Figure 7: Adult, 7-14 columns, eps 0.1, {a.reps} reps",
                ["columns", "cells", *[f"{m}: RMSE (R-RMSE), blocks, build s" for m in methods]], table,
                notes=[f"Columns, in order: {', '.join(FIG7_ORDER)} (the first n).",
                       "Identity is left out: it must materialise the domain (3.4 x 10^7 cells and more here, above its 2 x 10^7 limit)."], raw=raw, args=a)


def figure15(a, df, doms):
    from certdp.views import Workload, build_view, rmse, true_answers

    t = tensor_of(df, doms, ("age", "hours-per-week"))
    rng = np.random.default_rng(a.seed)
    w = Workload.random(t.shape, 3000, 2, rng)
    truth = true_answers(t, w)
    grid = [("epsilon", v) for v in (0.05, 0.1, 0.2, 0.5, 1.0)] + \
           [("alpha", v) for v in (0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 0.9)] + \
           [("gamma", v) for v in (0.1, 0.3, 0.5, 0.7, 0.9)] + \
           [("beta", v) for v in (0.1, 0.3, 0.4, 0.5, 0.7, 0.9)] + \
           [("k=os", v) for v in (1, 2, 4, 8)]
    table, raw = [], []
    for name, val in grid:
        kw = {"alpha": 0.3, "gamma": 0.9, "beta": 0.4}
        eps = 0.1
        if name == "epsilon":
            eps = val
        elif name == "k=os":
            kw.update(k=val, os=val)
        else:
            kw[name] = val
        errs, blocks = [], []
        for _ in range(a.reps):
            v = build_view(t, "ripost", eps, rng, **kw)
            errs.append(rmse(v.estimates(w), truth))
            blocks.append(v.n_blocks)
        table.append([name, val, np.mean(errs), np.std(errs), np.mean(blocks), np.std(blocks)])
        raw.append(dict(zip(["param", "value", "rmse", "rmse_sd", "blocks", "blocks_sd"], table[-1])))
        print(table[-1], flush=True)
    write_table("ripost_fig15", f"Paper 004 Figure 15: RIPOST's sensitivity, Adult (age, hours-per-week), "
                f"{a.reps} reps, one parameter varied at a time (others eps 0.1, alpha 0.3, gamma 0.9, beta 0.4, k=os=4)",
                ["parameter", "value", "RMSE", "sd", "blocks", "sd"], table, raw=raw, args=a)


def figure3(a, df, doms):
    from certdp.experiments.views import share_converged_with_error
    from certdp.views import build_view

    t = tensor_of(df, doms, ("age", "hours-per-week"))
    rng = np.random.default_rng(a.seed)
    table = []
    for m in ("ripost", "hdpview", "privtree"):
        shares, blocks = [], []
        for _ in range(a.reps):
            v = build_view(t, m, 0.1, rng)
            shares.append(share_converged_with_error(v, t))
            blocks.append(v.n_blocks)
        table.append([m, np.mean(shares), np.std(shares), np.mean(blocks)])
        print(table[-1], flush=True)
    write_table("ripost_fig3", f"Paper 004 Figure 3: share of leaves that converged with AE > 0, Adult "
                f"(age, hours-per-week), eps 0.1, {a.reps} reps",
                ["method", "share AE > 0", "sd", "blocks"], table,
                notes=["Paper: PrivTree 92%, HDPView 63%, RIPOST 29%."], args=a)


def decomposition(a, df, doms):
    """Where each method's error comes from: the RMSE of the view with exact leaf sums (the
    aggregation error alone) and of the leaf noise alone; plus the convergence tests' Laplace
    scales by depth for both RIPOST variants (from the views' parameters)."""
    from certdp.experiments.views import leaf_truth
    from certdp.views import Workload, build_view, rmse, true_answers
    from certdp.views.view import answer_boxes

    t = tensor_of(df, doms, ("age", "hours-per-week"))
    rng = np.random.default_rng(a.seed)
    w = Workload.random(t.shape, 3000, 2, rng)
    truth = true_answers(t, w)
    methods = [("ripost (paper)", "ripost", {"variant": "paper"}), ("ripost", "ripost", {}),
               ("hdpview", "hdpview", {}), ("privtree", "privtree", {})]
    table, scales = [], []
    for eps in (0.1, 1.0):
        for name, m, kw in methods:
            tot, agg, noise, blocks = [], [], [], []
            for _ in range(a.reps):
                v = build_view(t, m, eps, rng, **kw)
                sums = leaf_truth(v, t)[0]
                tot.append(rmse(v.estimates(w), truth))
                agg.append(rmse(answer_boxes(v.lo, v.hi, sums, t.shape, w), truth))
                noise.append(rmse(answer_boxes(v.lo, v.hi, v.values - sums, t.shape, w), np.zeros_like(truth)))
                blocks.append(v.n_blocks)
            table.append([eps, name, np.mean(tot), np.mean(agg), np.mean(noise), np.mean(blocks)])
            if m == "ripost":
                for n in v.params["noise"]:
                    if n["depth"] in (1, 2, 5, 10, 20):
                        scales.append(f"| {eps:g} | {name} | {n['phase']} | {n['depth']} | "
                                      f"{n['test_laplace_scale']:.4g} | {n['split_epsilon']:.3g} |")
            print(table[-1], flush=True)
    write_table("ripost_error_decomposition",
                f"Error decomposition, Adult (age, hours-per-week), {a.reps} reps",
                ["epsilon", "method", "RMSE", "RMSE, exact leaf sums (aggregation only)", "RMSE of the leaf noise only",
                 "blocks"], table,
                notes=["Convergence-test Laplace scale and cut epsilon by phase and depth (RIPOST, from the views' "
                       "params['noise']; the improved variant's tests are biased and charged once, so one scale "
                       "per phase):", "", "| epsilon | variant | phase | depth | test Laplace scale | cut epsilon |",
                       "|---|---|---|---|---|---|", *scales], args=a)


def leaf_budget(a, df, doms):
    """RIPOST's leaves at Algorithm 1's eps_p against each path's whole remainder, paired: the
    same seed gives both the same decomposition (the leaves are drawn last), so the rows differ
    only in the leaves' noise. Also the spend of the paths, from the accountant."""
    from certdp.views import Workload, build_view, rmse, true_answers

    sets = [("age", "hours-per-week"), ("age", "education", "sex"), ("workclass", "education", "marital-status",
                                                                     "race"), FIG5_COLUMNS[:5], FIG5_COLUMNS[:6]]
    table, raw = [], []
    for cols in sets:
        t = tensor_of(df, doms, cols)
        w = Workload.random(t.shape, 3000, min(a.query_columns, len(cols)), np.random.default_rng(a.seed))
        truth = true_answers(t, w)
        for eps in (0.1, 1.0):
            res = {}
            for mode in ("fixed", "rest"):
                vs = [build_view(t, "ripost", eps, a.seed + r, leaf_budget=mode) for r in range(a.reps)]
                res[mode] = {"rmse": float(np.mean([rmse(v.estimates(w), truth) for v in vs])),
                             "spend_min": float(np.min([v.params["path_spend"]["min"] for v in vs])),
                             "spend_max": float(np.max([v.params["path_spend"]["max"] for v in vs])),
                             "leaf_eps_mean": float(np.mean([v.params["leaf_epsilon"]["mean"] for v in vs])),
                             "blocks": float(np.mean([v.n_blocks for v in vs]))}
            f, r = res["fixed"], res["rest"]
            table.append([len(cols), ",".join(cols), eps, f["blocks"], f"{f['spend_min']:.4g}-{f['spend_max']:.4g}",
                          f"{r['spend_min']:.4g}-{r['spend_max']:.4g}", f["leaf_eps_mean"], r["leaf_eps_mean"],
                          f["rmse"], r["rmse"], r["rmse"] / f["rmse"]])
            raw.append({"columns": cols, "epsilon": eps, **{m: v for m, v in res.items()}})
            print(table[-1], flush=True)
    write_table("ripost_leaf_budget",
                f"RIPOST leaves: fixed eps_p against the path's rest, Adult, {a.reps} paired reps",
                ["columns", "set", "epsilon", "blocks", "path spend, fixed", "path spend, rest", "leaf eps, fixed",
                 "leaf eps, rest (mean)", "RMSE fixed", "RMSE rest", "rest / fixed"], table,
                notes=["alpha 0.3, gamma 0.9, beta 0.4, k = os = 4 (the series sums to 1); the same seeds for both "
                       "columns, so the decompositions are identical and only the leaves' noise differs",
                       "path spend: the exact sums of the charges on root-to-leaf paths (the accountant's), "
                       "min-max over the leaves of all reps"], raw=raw, args=a)


def _build_child(method: str, eps: float, conn) -> None:
    """Runs in a fresh process: build the 14-column view, report seconds, blocks and peak RSS."""
    import resource

    from certdp.views import build_view

    try:
        df, doms = load()
        t = tensor_of(df, doms, FIG7_ORDER)
        t0 = time.perf_counter()
        v = build_view(t, method, eps)                # secure path: OpenDP samplers (PrivBayes: its own)
        secs = time.perf_counter() - t0
        conn.send({"seconds": secs, "blocks": v.n_blocks, "spent": v.spent, "cells": t.domain_size,
                   "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
    except Exception as exc:                          # reported in the table, not raised
        conn.send({"error": f"{type(exc).__name__}: {exc}"})


def build14(a, df, doms):
    """Every method on the 14-column Adult view, each in its own process (peak memory is that
    process's maximum resident set, the Python interpreter and the data included), capped at
    ``--cap`` seconds."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    rows, raw = [], []
    for method in METHODS:
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_build_child, args=(method, a.epsilon, send))
        t0 = time.perf_counter()
        proc.start()
        got = recv.poll(a.cap)
        res = recv.recv() if got else {"error": f"not finished within {a.cap:g} s"}
        if proc.is_alive():
            proc.kill()
        proc.join()
        res.setdefault("wall", time.perf_counter() - t0)
        raw.append({"method": method, **res})
        rows.append([method, *(["-", "-", "-", res["error"]] if "error" in res else
                               [f"{res['seconds']:.2f}", f"{res['peak_mb']:.0f}", res["blocks"], ""])])
        print(rows[-1], flush=True)
    cells = tensor_of(df, doms, FIG7_ORDER).domain_size
    write_table("views_build14", f"Adult, 14 columns ({cells:.3g} cells, overflow bins included), "
                f"eps {a.epsilon:g}: build time and peak memory of every method, secure randomness",
                ["method", "seconds", "peak MB", "blocks / records / marginals", "why not"], rows, raw=raw, args=a)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--figure", choices=["5", "7", "15", "3", "build14", "decomposition", "budget"], required=True)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--sets", type=int, default=5, help="figure 5: column sets per number of columns")
    ap.add_argument("--query-columns", type=int, default=2)
    ap.add_argument("--seed", type=int, default=2025)
    ap.add_argument("--epsilon", type=float, default=0.1, help="figures 5 and build14: the privacy budget")
    ap.add_argument("--cap", type=float, default=900.0, help="build14: seconds per method")
    a = output_args(ap).parse_args()
    if not (DATA / "adult.data").is_file():
        print(f"skipped: the Adult data is not in {DATA}")
        return
    df, doms = load()
    {"5": figure5, "7": figure7, "15": figure15, "3": figure3, "build14": build14, "decomposition": decomposition,
     "budget": leaf_budget}[a.figure](a, df, doms)


if __name__ == "__main__":
    main()
