"""Tables 1-2 of paper 000 on our instances: subproblem sizes and master component sizes for
every partitioner (M = 25 subsets by default; ``--subsets 2 5 10 25`` shows how the master
shrinks and the blocks grow with M), with respect to the reduced mDP constraints (``--edges
all``: every neighbour pair, as the paper's definitions read), beside the paper's own figures
(mean over its 10 instances). With ``--seeds S`` each instance is drawn S times (``NAME-s1``
... ``NAME-sS``) and every figure is the mean +- 1.96 standard deviations over them, as the
paper reports.

    python -m benchmarks.paper000.partition_tables --edges all --seeds 10 --name partition_tables_10 \\
        --instances grid-500-paper road-500-paper text-500-paper gauss-500-paper
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from certdp import MDPGraph
from certdp.experiments import instances
from certdp.pmo.partition import PARTITIONERS, partition

from .._common import output_args, write_table

#: paper 000 Tables 1 and 2 (M = 25), by kind and partitioner: (subproblem mean, max, master
#: component mean, max), each the mean over its 10 instances
PAPER = {
    "road": {"kmeans-dv": (9.5, 18.6, 11.3, 42.5), "kmeans-rec": (10.1, 16.1, 37.9, 98.75),
             "kmeans-adj": (17.7, 34.6, 40.4, 117.8), "bsc": (15.4, 32.1, 64.7, 121.1)},
    "grid": {"kmeans-dv": (4.7, 11.3, 3.6, 22.1), "kmeans-rec": (3.7, 10.2, 8.8, 10.3),
             "kmeans-adj": (14.9, 28.3, 9.0, 99.5), "bsc": (3.0, 17.2, 18.6, 27.1)},
    "text": {"kmeans-dv": (12.6, 31.8, 8.0, 36.0), "kmeans-rec": (4.9, 42.7, 9.7, 53.2),
             "kmeans-adj": (44.7, 103.2, 8.8, 112.7), "bsc": (33.0, 62.4, 11.4, 79.2)},
    "gauss": {"kmeans-dv": (9.6, 17.9, 10.9, 35.9), "kmeans-rec": (10.2, 19.8, 12.4, 46.3),
              "kmeans-adj": (8.5, 90.0, 17.9, 41.3), "bsc": (8.4, 90.2, 18.3, 63.6)},
}
FIELDS = ("subproblem_mean", "subproblem_max", "boundary_records", "master_components", "master_component_mean",
          "master_component_max", "cut_edges")


def mean_ci(values: list[float]) -> str:
    """``mean +- 1.96 sd`` (population sd, as one figure over the instances), or the value alone."""
    v = np.asarray(values, dtype=float)
    return f"{v.mean():.3g}" if len(v) == 1 else f"{v.mean():.3g} ± {1.96 * v.std():.2g}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", nargs="+", default=["grid-500-paper", "road-500-paper", "text-500-paper",
                                                       "gauss-500-paper", "grid-500", "road-500", "text-500",
                                                       "gauss-500"])
    ap.add_argument("--edges", choices=["reduced", "all"], default="reduced")
    ap.add_argument("--subsets", type=int, nargs="+", default=[25])
    ap.add_argument("--seeds", type=int, default=None, help="draw each instance this many times (NAME-s1 ...)")
    ap.add_argument("--partitioners", nargs="+", choices=list(PARTITIONERS), default=list(PARTITIONERS))
    ap.add_argument("--name", default=None, help="results file name (default partition_tables[_all_edges])")
    a = output_args(ap).parse_args()
    rows, raw = [], []
    for base in a.instances:
        names = [base] if a.seeds is None else [f"{base}-s{s}" for s in range(1, a.seeds + 1)]
        per: dict[tuple[int, str], list[dict[str, Any]]] = {}
        for name, sp in instances.available(names):
            g = MDPGraph.from_space(sp)
            e = g.edges[~g.implied_edges()] if a.edges == "reduced" else g.edges
            for m in a.subsets:
                for method in a.partitioners:
                    t0 = time.perf_counter()
                    p = partition(sp, method, m, seed=0, graph=g)
                    st = p.stats(e) | {"seconds": time.perf_counter() - t0, "instance": name,
                                       "mean_degree": 2 * len(g.edges) / sp.n_records, "epsilon": sp.epsilon}
                    st.pop("internal_per_subset"), st.pop("boundary_per_subset")
                    per.setdefault((m, method), []).append(st)
                    raw.append(st)
        for (m, method), sts in per.items():
            ref = PAPER.get(base.split("-")[0], {}).get(method) if m == 25 and "paper" in base else None
            rows.append([base, len(sts), f"{sts[0]['epsilon']:.3g}", mean_ci([s["mean_degree"] for s in sts]), method,
                         m] + [mean_ci([s[f] for s in sts]) for f in FIELDS]
                        + [mean_ci([s["seconds"] for s in sts]), "/".join(f"{v:g}" for v in ref) if ref else None])
    name = a.name or ("partition_tables" + ("" if a.edges == "reduced" else "_all_edges"))
    write_table(name, "Partition statistics (paper 000 Tables 1-2) at M = " + ", ".join(map(str, a.subsets)),
                ["instance", "instances", "eps", "mean degree", "partitioner", "subsets", "subproblem mean",
                 "subproblem max", "boundary records", "master comps", "master comp mean", "master comp max",
                 "cut edges", "seconds", "paper sub mean/max, comp mean/max"],
                rows, notes=["sizes in records; subproblem = internal records of a subset; master components = "
                             f"connected components of the mDP graph induced on boundary records ({a.edges} edges)",
                             "with several instances: mean ± 1.96 standard deviations over them (paper 000's form)",
                             "paper: Tables 1-2 of paper 000, mean over its 10 instances (Rome road network and grid, "
                             "MATLAB word2vec, 3-d Gaussian)",
                             "instances: certdp.experiments.instances (NAME-sS: instance S of NAME)"], raw=raw, args=a)


if __name__ == "__main__":
    main()
