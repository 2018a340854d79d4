"""The text sanitizer's mechanism as the vocabulary grows: what building it costs and what it
saves over ExpMech, on the word2vec file (the first N single words, as ``certdp sanitize`` takes
them; every pair protected, epsilon per unit of embedding distance).

For each N, in one process: ExpMech (the baseline) and ConstOPTMech (``certdp sanitize``'s
default: r = 10, its lambda sweep) over the same vocabulary. Reported: CPU seconds of each
build (process time, less sensitive than wall time to other work on a shared machine) and their
ratio, the worst-case and median per-word loss of each, and the loss ratio. Every mechanism is
certified on all N (N - 1) / 2 pairs before it is returned.

    python -m benchmarks.paper002.sanitizer [--sizes 100,250,500,1000] [--epsilon 8]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from certdp import build_space, solve
from certdp.cli.mechanisms import exact
from certdp.datasets import vocabulary
from certdp.experiments.instances import words_file
from certdp.text import WORD

from .._common import Steps, output_args, write_table


def build(space, method: str, steps: Steps) -> tuple[float, np.ndarray]:
    """(CPU seconds, per-word expected distance) of ``method`` on ``space``."""
    t0 = time.process_time()
    res = solve(space, method, progress=steps)
    secs = time.process_time() - t0
    return secs, (exact(res).matrix * space.cost).sum(axis=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,250,500", help="vocabulary sizes N")
    ap.add_argument("--epsilon", type=float, default=8.0, help="per unit of embedding distance")
    a = output_args(ap).parse_args()
    sizes = [int(x) for x in a.sizes.split(",") if x]
    path = words_file()
    if not path.exists():
        print(f"skipped: the word2vec file is not there ({path})")
        return
    rows, raw = [], []
    with Steps("sanitizer builds", 2 * len(sizes)) as steps:
        for n in sizes:
            space = build_space(vocabulary(path, n, pattern=WORD), epsilon=a.epsilon, eta=float("inf"), seed=0)
            s_em, l_em = build(space, "expmech", steps)
            steps.done(f"N={n} expmech: {s_em:.1f} CPU s")
            s_co, l_co = build(space, "constopt", steps)
            steps.done(f"N={n} constopt: {s_co:.1f} CPU s")
            rows.append([n, s_em, s_co, s_co / s_em, float(l_em.max()), float(l_co.max()),
                         float(l_co.max() / l_em.max()), float(np.median(l_em)), float(np.median(l_co))])
            raw.append(dict(zip(["N", "expmech_cpu_s", "constopt_cpu_s", "cpu_ratio", "expmech_worst",
                                 "constopt_worst", "worst_ratio", "expmech_median", "constopt_median"], rows[-1])))
            write_table("sanitizer", f"The sanitizer's mechanism against the vocabulary size (word2vec, epsilon "
                        f"{a.epsilon:g}, every pair protected)",
                        ["N", "ExpMech CPU s", "ConstOPT CPU s", "CPU ratio", "ExpMech worst loss",
                         "ConstOPT worst loss", "worst ratio", "ExpMech median loss", "ConstOPT median loss"],
                        rows, notes=["CPU s: process time of the build, certification included",
                                     "worst/median loss: over the vocabulary, of each word's expected embedding "
                                     "distance to its replacement",
                                     "ratio: ConstOPTMech over ExpMech, same vocabulary, same run"],
                        raw=raw, args=a)


if __name__ == "__main__":
    main()
