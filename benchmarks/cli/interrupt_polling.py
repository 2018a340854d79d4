"""What it costs a HiGHS solve to poll for Ctrl-C at every iteration (certdp.lp.highs), and
why models below ``INTERRUPTIBLE_NONZEROS`` are left unpolled.

The monolithic PMO LP of a family of grid instances (every HiGHS solve of ``solve(space,
'lp')``) is solved twice in this process, with every model polled and with none, in
alternation, ``--repeat`` times each; the table gives per instance the model's non-zeros, the
iterations (the same both ways: polling changes nothing in the solve) and the ratio of the
solve's CPU time (of the solving thread, less noisy than wall time on a shared machine) polled
over unpolled, best of the repeats, with the median and the worst case over the family.

    python -m benchmarks.cli.interrupt_polling [--grids 6x6 8x8 10x10 12x12] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from unittest import mock

from certdp import build_space, solve
from certdp.datasets import grid
from certdp.lp import highs

from .._common import output_args, write_table


def measure(space, threshold: int) -> tuple[float, int, int]:
    """CPU seconds, iterations and largest model (non-zeros) of ``solve(space, 'lp')``'s HiGHS
    solves, with models of at least ``threshold`` non-zeros polled."""
    seconds, iterations, nnz = 0.0, 0, 0
    real_init, real_solve = highs.HighsLP.__init__, highs.HighsLP.solve

    def init(self, c, A, *args, **kw):
        nonlocal nnz
        nnz = max(nnz, A.nnz)
        real_init(self, c, A, *args, **kw)

    def timed(self, *args, **kw):
        nonlocal seconds, iterations
        t0 = time.thread_time()
        sol = real_solve(self, *args, **kw)
        seconds += time.thread_time() - t0
        iterations += sol.iterations
        return sol

    with (mock.patch.object(highs, "INTERRUPTIBLE_NONZEROS", threshold),
          mock.patch.object(highs.HighsLP, "__init__", init), mock.patch.object(highs.HighsLP, "solve", timed)):
        solve(space, "lp")
    return seconds, iterations, nnz


def main() -> None:
    ap = output_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    ap.add_argument("--grids", nargs="*", default=["6x6", "8x8", "10x10", "12x12", "14x14"])
    ap.add_argument("--outputs", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows, ratios = [], []
    for g in args.grids:
        r, c = map(int, g.split("x"))
        space = build_space(grid(r, c, 1.0), epsilon=1.0, eta=1.5, n_outputs=min(args.outputs, r * c),
                            cost="travel", seed=1)
        polled, plain = [], []
        for _ in range(args.repeat):
            polled.append(measure(space, 0))
            plain.append(measure(space, 10**12))
        p, q = min(x[0] for x in polled), min(x[0] for x in plain)
        assert polled[0][1] == plain[0][1], "polling changed the solve"
        ratios.append(p / q)
        rows.append([f"grid:{g}", space.n_outputs, polled[0][2], plain[0][1], q, p, p / q,
                     "yes" if polled[0][2] >= highs.INTERRUPTIBLE_NONZEROS else "no"])
    notes = [f"ratio polled / unpolled: median {statistics.median(ratios):.3f}, worst {max(ratios):.3f} "
             f"over {len(ratios)} instances; best of {args.repeat} runs each, alternated.",
             f"polled by default: models of at least {highs.INTERRUPTIBLE_NONZEROS:,} non-zeros."]
    write_table("interrupt_polling", "HiGHS polling for Ctrl-C: CPU time of the monolithic LP's solves",
                ["instance", "K", "non-zeros", "iterations", "unpolled (s)", "polled (s)", "ratio",
                 "polled by default"], rows, notes, args=args)


if __name__ == "__main__":
    main()
