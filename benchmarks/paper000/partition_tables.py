"""Tables 1-2 of paper 000 on our instances: subproblem sizes and master component sizes for
every partitioner (M = 25 subsets by default; ``--subsets 2 5 10 25`` shows how the master
shrinks and the blocks grow with M), with respect to the reduced mDP constraints (``--edges
all``: every neighbour pair, as the paper's definitions read), beside the paper's own k-m-DV
figures (mean over its 10 instances)."""

from __future__ import annotations

import argparse
import time

from certdp import MDPGraph
from certdp.experiments import instances
from certdp.pmo.partition import PARTITIONERS, partition

from .._common import output_args, write_table

#: paper 000 Tables 1 and 2, k-m-DV, M = 25: (subproblem mean, max, master component mean, max)
PAPER_KMDV = {"road": (9.5, 18.6, 11.3, 42.5), "grid": (4.7, 11.3, 3.6, 22.1), "text": (12.6, 31.8, 8.0, 36.0),
              "gauss": (9.6, 17.9, 10.9, 35.9)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", nargs="+", default=["grid-500-paper", "road-500-paper", "text-500-paper",
                                                       "gauss-500-paper", "grid-500", "road-500", "text-500",
                                                       "gauss-500"])
    ap.add_argument("--edges", choices=["reduced", "all"], default="reduced")
    ap.add_argument("--subsets", type=int, nargs="+", default=[25])
    a = output_args(ap).parse_args()
    rows, raw = [], []
    for name, sp in instances.available(a.instances):
        g = MDPGraph.from_space(sp)
        imp = g.implied_edges()
        e = g.edges[~imp] if a.edges == "reduced" else g.edges
        deg = 2 * len(g.edges) / sp.n_records
        for m, method in ((m, method) for m in a.subsets for method in PARTITIONERS):
            t0 = time.perf_counter()
            p = partition(sp, method, m, seed=0, graph=g)
            t = time.perf_counter() - t0
            st = p.stats(e)
            ref = PAPER_KMDV.get(name.split("-")[0]) if (method, m) == ("kmeans-dv", 25) and "paper" in name else None
            row = [name, f"{sp.epsilon:.3g}", f"{deg:.1f}", method, st["subsets"], st["subproblem_mean"],
                   st["subproblem_max"], st["boundary_records"], st["master_components"],
                   st["master_component_mean"], st["master_component_max"], st["cut_edges"], t,
                   "/".join(f"{v:g}" for v in ref) if ref else None]
            rows.append(row)
            raw.append(st | {"instance": name, "seconds": t})
    write_table("partition_tables" + ("" if a.edges == "reduced" else "_all_edges"),
                "Partition statistics (paper 000 Tables 1-2) at M = " + ", ".join(map(str, a.subsets)),
                ["instance", "eps", "mean degree", "partitioner", "subsets", "subproblem mean", "subproblem max",
                 "boundary records", "master comps", "master comp mean", "master comp max", "cut edges", "seconds",
                 "paper k-m-DV sub mean/max, comp mean/max"],
                rows, notes=["sizes in records; subproblem = internal records of a subset; master components = "
                             f"connected components of the mDP graph induced on boundary records ({a.edges} edges)",
                             "instances: certdp.experiments.instances"], raw=raw, args=a)


if __name__ == "__main__":
    main()
