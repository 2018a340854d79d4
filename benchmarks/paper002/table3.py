"""Paper 002, Table 3: ablation of ConstOPTMech over lambda (r = 5) and over r (lambda = 50)
on a 200-word vocabulary: L_0.95, LP constraints and seconds per single LP.

    python -m benchmarks.paper002.table3 [--n 200] [--epsilon 8]
"""

from __future__ import annotations

import argparse

from scaledp import solve
from scaledp.experiments.instances import uai
from scaledp.measures import quantile_loss

from .._common import output_args, write_table


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--epsilon", type=float, default=8.0)
    a = output_args(ap).parse_args()
    try:
        space = uai("text", a.n, a.epsilon)
    except FileNotFoundError as exc:
        print(f"skipped: the real data for text is not there ({exc})")
        return
    rows = []
    for part, grid in (("lambda (r = 5)", [(5, lam) for lam in (0.1, 1.0, 10.0, 50.0, 250.0)]),
                       ("r (lambda = 50)", [(r, 50.0) for r in (1, 3, 5, 7, 9)])):
        for r, lam in grid:
            res = solve(space, "constopt", r=r, lambdas=[lam])
            rows.append([part, r, lam, quantile_loss(res.mechanism.matrix, space.cost), res.stats["constraints"],
                         res.stats["nonzeros"], res.timings["solve"], res.timings["total"]])
            print(rows[-1], flush=True)
    write_table("uai_table3", f"Paper 002 Table 3: ConstOPTMech ablation, text n = {a.n}, eps = {a.epsilon}",
                ["varied", "r", "lambda", "L_0.95", "constraints", "non-zeros", "LP seconds", "total seconds"], rows,
                notes=["one lambda per run (no sweep); total includes assembly and exact certification",
                       "paper (FastText, n = 200): L_q 1.64-1.54 over lambda, 2.04-1.49 over r; constraints "
                       "81,000-186,920"], args=a)


if __name__ == "__main__":
    main()
