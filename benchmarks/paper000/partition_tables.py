"""Tables 1-2 of paper 000 on our instances: subproblem sizes and master component sizes for
every partitioner (M = 25 subsets by default; ``--subsets 2 5 10 25`` shows how the master
shrinks and the blocks grow with M), with respect to the reduced mDP constraints (``--edges
all``: every neighbour pair, as the paper's definitions read), beside the paper's own figures
(mean over its 10 instances). With ``--seeds S`` each instance is drawn S times (``NAME-s1``
... ``NAME-sS``), instance S partitioned with k-means seed S (the grid is one map, so its
instances differ by the seed alone), and every figure is the mean +- 1.96 standard deviations
over them, as the paper reports.

Both readings of the tables are reported (:meth:`certdp.pmo.partition.Partition.stats`):
subproblem mean over the subproblems there are, or over all M subsets (a subset without
internal records counting 0: the paper's published code); master components on the graph
induced on the boundary records (Eq. 25, our master) or on the cut edges alone (the published
code's master).

The ``-code`` instances are those of the paper's published MATLAB code
(github.com/chenxiunt/MetricDP_BendersDecomposition, ``MATLAB code/functions/myReadData``):
``grid-500-code`` the first 500 cells of its 30 x 50 grid of 1.5 km cells (10 x 50, each cell
with its 4 lattice neighbours at eta = 2 km; section 4.1 describes 20 x 25 cells of 1 km),
``gauss-500-code`` 500 points of N(0, 16 I) in 3-d at eta = 2, and, with ``--paper-code DIR``
(that repository's ``MATLAB code/Dataset`` folder), ``rome-500-code``: its 500 Rome nodes
(``rome/intermediate/node_in_target.mat`` rows of ``rome/raw/nodes_rome.csv``) at eta = 2 km
under its distance, the Haversine formula given (longitude, latitude) where it takes
(latitude, longitude), as ``distanceMatrix.m`` calls it; epsilon 10 on each.

    python -m benchmarks.paper000.partition_tables --edges all --seeds 10 --name partition_tables_10 \\
        --instances grid-500-paper road-500-paper text-500-paper gauss-500-paper
    python -m benchmarks.paper000.partition_tables --edges all --seeds 10 --name partition_tables_code \\
        --instances grid-500-code gauss-500-code rome-500-code --paper-code "DIR/MATLAB code/Dataset"
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from certdp import MDPGraph, Space, build_space
from certdp.datasets import gaussian, grid, latlon
from certdp.experiments import instances
from certdp.pmo.partition import PARTITIONERS, Partition, partition

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
FIELDS = ("subproblem_mean", "internal_mean", "subproblem_max", "boundary_records", "master_components",
          "master_component_mean", "master_component_max", "cut_components", "cut_component_mean",
          "cut_component_max", "cut_edges")
LARGEST = ("largest_subset_records", "median_subset_records", "largest_subset_diameter", "largest_internal_degree")


def code_instance(name: str, paper_code: Path | None) -> Space:
    """A ``-code`` instance (module docstring): ``KIND-500-code[-sS]``, S the draw of the
    Gaussian (the grid and the Rome nodes are fixed)."""
    kind, _, _, *rest = name.split("-")
    seed = int(rest[0][1:]) if rest else 1
    if kind == "grid":
        ds = grid(10, 50, 1.5)
    elif kind == "gauss":
        g = gaussian(500, 3, seed=seed)
        ds = type(g)(points=4.0 * g.points, metric=g.metric, name="gaussian:500:3 x 4")
    elif kind == "rome":
        if paper_code is None:
            raise FileNotFoundError("rome-500-code needs --paper-code")
        from scipy.io import loadmat

        rows = loadmat(paper_code / "rome/intermediate/node_in_target.mat")["node_in_target"].ravel() - 1
        xy = np.genfromtxt(paper_code / "rome/raw/nodes_rome.csv", delimiter=",", skip_header=1,
                           usecols=(2, 1))   # columns x (longitude), y (latitude)
        ds = latlon(xy[rows], name="rome-500 (lon, lat) as the paper's code")
    else:
        raise KeyError(f"unknown instance {name!r}")
    return build_space(ds, epsilon=10.0, eta=2.0, n_outputs=100, seed=seed)


def load(names: list[str], paper_code: Path | None):
    """(name, space) of each instance present, ``-code`` ones included."""
    for name in names:
        if "-code" not in name:
            yield from instances.available([name])
            continue
        try:
            yield name, code_instance(name, paper_code)
        except FileNotFoundError as exc:
            print(f"skip {name}: {exc}")


def largest_subproblem(sp: Space, p: Partition, e: np.ndarray, degree: np.ndarray) -> dict[str, float]:
    """What the largest subproblem holds: its subset's records, their diameter and the mean mDP
    degree of its internal records, against the median subset (k-m-DV's subsets have about
    one spatial extent, so the records they hold follow the density of the data)."""
    boundary = p.boundary_mask(e)
    internal = np.bincount(p.labels[~boundary], minlength=p.n_subsets)
    sizes = np.bincount(p.labels, minlength=p.n_subsets)
    big = int(np.argmax(internal))
    inside = (p.labels == big) & ~boundary
    members = np.flatnonzero(p.labels == big)
    return {"largest_subset_records": int(sizes[big]), "median_subset_records": float(np.median(sizes)),
            "largest_subset_diameter": float(sp.distance_rows(members)[:, members].max()),
            "largest_internal_degree": float(degree[inside].mean()) if inside.any() else 0.0}


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
    ap.add_argument("--paper-code", type=Path, default=None,
                    help="the 'MATLAB code/Dataset' folder of the paper's repository (for rome-500-code)")
    a = output_args(ap).parse_args()
    rows, raw = [], []
    for base in a.instances:
        names = [base] if a.seeds is None else [f"{base}-s{s}" for s in range(1, a.seeds + 1)]
        per: dict[tuple[int, str], list[dict[str, Any]]] = {}
        for name, sp in load(names, a.paper_code):
            seed = int(name.rsplit("-s", 1)[1]) if a.seeds is not None else 0
            g = MDPGraph.from_space(sp)
            e = g.edges[~g.implied_edges()] if a.edges == "reduced" else g.edges
            degree = np.bincount(g.edges.ravel(), minlength=sp.n_records)
            for m in a.subsets:
                for method in a.partitioners:
                    t0 = time.perf_counter()
                    p = partition(sp, method, m, seed=seed, graph=g)
                    st = p.stats(e) | {"seconds": time.perf_counter() - t0, "instance": name,
                                       "mean_degree": float(degree.mean()), "epsilon": sp.epsilon,
                                       "degree_cv": float(degree.std() / degree.mean())} | largest_subproblem(sp, p, e, degree)
                    st.pop("internal_per_subset"), st.pop("boundary_per_subset")
                    per.setdefault((m, method), []).append(st)
                    raw.append(st)
        for (m, method), sts in per.items():
            kind = {"rome": "road"}.get(base.split("-")[0], base.split("-")[0])
            ref = PAPER.get(kind, {}).get(method) if m == 25 and ("paper" in base or "code" in base) else None
            rows.append([base, len(sts), f"{sts[0]['epsilon']:.3g}", mean_ci([s["mean_degree"] for s in sts]),
                         mean_ci([s["degree_cv"] for s in sts]), method, m] + [mean_ci([s[f] for s in sts]) for f in FIELDS]
                        + [mean_ci([s[f] for s in sts]) for f in LARGEST]
                        + [mean_ci([s["seconds"] for s in sts]), "/".join(f"{v:g}" for v in ref) if ref else None])
    name = a.name or ("partition_tables" + ("" if a.edges == "reduced" else "_all_edges"))
    write_table(name, "Partition statistics (paper 000 Tables 1-2) at M = " + ", ".join(map(str, a.subsets)),
                ["instance", "instances", "eps", "mean degree", "degree cv", "partitioner", "subsets", "subproblem mean",
                 "internal mean (all M)", "subproblem max", "boundary records", "master comps", "master comp mean",
                 "master comp max", "cut comps", "cut comp mean", "cut comp max", "cut edges",
                 "largest subproblem's subset", "median subset", "its diameter", "largest subproblem's degree",
                 "seconds",
                 "paper sub mean/max, comp mean/max"],
                rows, notes=["sizes in records; subproblem = internal records of a subset; subproblem mean over the "
                             "subproblems there are, internal mean over all M subsets (the paper's code); master "
                             "components = connected components of the mDP graph induced on boundary records "
                             f"({a.edges} edges), cut components = those of the graph of cut edges alone (the "
                             "paper's code's master)",
                             "degree cv: the standard deviation of the records' mDP degrees over their mean; largest "
                             "subproblem's subset: the records (internal and boundary) of the subset with the most "
                             "internal records, against the median subset, and their largest distance (the data's "
                             "unit); its degree: the mean mDP degree of those "
                             "internal records",
                             "instance S of a family is partitioned with k-means seed S",
                             "with several instances: mean ± 1.96 standard deviations over them (paper 000's form)",
                             "paper: Tables 1-2 of paper 000, mean over its 10 instances (Rome road network and grid, "
                             "MATLAB word2vec, 3-d Gaussian)",
                             "instances: certdp.experiments.instances (NAME-sS: instance S of NAME)"], raw=raw, args=a)


if __name__ == "__main__":
    main()
