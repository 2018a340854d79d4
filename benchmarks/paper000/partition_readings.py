"""Readings of paper 000's Tables 1-2 for k-m-adj and k-m-rec on the Rome data of its published
code: which way of building the instance, the adjacency, the k-means and the count gives the
paper's k-m-adj largest subproblem (34.6 +- 12.5 records) and k-m-rec master components
(37.9 +- 24.7 / 98.75 +- 44.4 records, road)?

The data are those of the paper's MATLAB code (github.com/chenxiunt/MetricDP_BendersDecomposition,
``--paper-code DIR``, its ``MATLAB code/Dataset`` folder): ``rome/raw/nodes_rome.csv`` (43,160
OpenStreetMap nodes; their extent is the bounding box of the paper's section 4.1) and
``rome/intermediate/node_in_target.mat`` (the 500 of them ``readCityMapInfo.m`` loads). Each
reading is measured over 10 instances, mean +- 1.96 standard deviations (the paper's form):

instances   ``code``: the code's 500 nodes, k-means seed S = 1..10; ``draw``: 10 draws of 500 of
            the 43,160 nodes (draw S with seed S), the way the fixed 500 were drawn (they span
            the whole box)
metric      ``code``: Haversine given (longitude, latitude) where it takes (latitude,
            longitude), as ``distanceMatrix.m`` calls it; ``true``: (latitude, longitude)
eta         2 km (``parameters.m``) unless the row says otherwise; neighbours d < eta
adjacency   (k-m-adj) ``open``: w_ii = 0, the code on road data (``heaviside(1 - D/eta) - eye``);
            ``closed``: w_ii = 1 (our kmeans-adj; the code on grid, text and Gaussian data);
            ``weighted``: w_ij d_ij (the code's ``mDPMatrix``); ``row-norm``: closed rows over
            their sums
k-means     ``ours``: best of 4 greedy k-means++ runs (scikit-learn, as
            :func:`certdp.pmo.partition.partition`); ``matlab``: MATLAB's ``kmeans`` defaults, one
            run of plain k-means++ seeding, squared Euclidean, batch updates, at most 100
            iterations, an emptied cluster refilled with the farthest point (``singleton``)

Counts, per instance: ``internal mean`` over all M = 25 subsets (``agentCreation.m``'s
``sub_size``); ``internal max``; ``subset max`` (records of the largest subset, internal and
boundary: ``agentCreation.m``'s saved ``subproblem_size``); ``piece`` mean / max (a subset's
internal records split into the connected pieces of the mDP graph among them, each an
independent LP by Property 3.1); the master's components over the graph of cut edges (the code's
master, ``masterAgentCreation.m``; components of one record, the records without a cut edge, left
out as ``binsizes > 1`` does), their mean weighted by records (the size of the component a
boundary record is in), and over the graph induced on the boundary records (Eq. 25). (Over the
cut edges that Property 3.2 does not imply they are the same: it implies none of these edges,
the Haversine triangle inequality being strict for points in general position; the notes give
the count.) Two structural columns: the mean degree of the records of the largest subset, and
how many connected pieces of the mDP graph that subset is made of.

``saved run`` is the partition the repository itself stores for Rome
(``rome/intermediate/cluster_idx.mat``; its boundary records are ``node_boundary.mat`` and its
master's cut edges those of ``matlab.mat``: the notes say whether our graph reproduces both, and
for how many records the nearest centroid of their subset is their own on each partitioner's
rows, 500 of 500 being a k-means fixed point).

``--heldout DIR`` (a folder of ``NAME_nodes.csv`` with id, lon, lat) adds, per network, 10 draws
of 500 of its nodes under the true Haversine, eta set on each draw to give the mean degree of the
code's Rome instance (8.52): the half-way point between the 2,129th and 2,130th shortest pair.

    python -m benchmarks.paper000.partition_readings --paper-code "DIR/MATLAB code/Dataset" \\
        --heldout /work/heldout/roads --name partition_readings
"""

from __future__ import annotations

import argparse
import time
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from certdp import MDPGraph
from certdp.pmo.partition import Partition, partition

from .._common import output_args, write_table
from .partition_tables import code_instance

M = 25
#: the paper's Tables 1-2, road: (internal mean, internal max, master component mean, max)
PAPER = {"dv": (9.5, 18.6, 11.3, 42.5), "rec": (10.1, 16.1, 37.9, 98.75), "adj": (17.7, 34.6, 40.4, 117.8),
         "bsc": (15.4, 32.1, 64.7, 121.1)}
#: the mean degree of the code's Rome instance (eta 2 km, its metric): the held-out eta's target
ROME_DEGREE = 8.516
COLUMNS = ("internal mean", "internal max", "subset max", "piece mean", "piece max", "cut comp mean",
           "cut comp max", "cut comp mean by record", "induced comp mean", "induced comp max",
           "largest subset: degree", "largest subset: pieces")
KEYS = ("internal_mean", "internal_max", "subset_max", "piece_mean", "piece_max", "cut_mean", "cut_max",
        "cut_by_record", "induced_mean", "induced_max", "big_degree", "big_pieces")


def haversine(lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    """Pairwise Haversine distances (km, radius 6371 as ``haversine.m``) of points given as
    (lat, lon) degrees; pass (lon, lat) to get the code's distance."""
    a, b = np.radians(lat), np.radians(lon)
    h = (np.sin((a[None] - a[:, None]) / 2) ** 2
         + np.cos(a[:, None]) * np.cos(a[None]) * np.sin((b[None] - b[:, None]) / 2) ** 2)
    return 6371.0 * 2 * np.arctan2(np.sqrt(h), np.sqrt(np.clip(1 - h, 0, None)))


def matlab_kmeans(X: np.ndarray, k: int, seed: int, max_iter: int = 100) -> np.ndarray:
    """MATLAB ``kmeans(X, k)`` with its defaults: plain k-means++ seeding (each next centre drawn
    with probability proportional to the squared distance to the nearest centre), squared
    Euclidean distance, batch (Lloyd) updates until no label changes or ``max_iter``
    iterations, one replicate, an emptied cluster refilled with the point farthest from its
    centroid (``EmptyAction 'singleton'``). The random stream is numpy's, not MATLAB's."""
    rng = np.random.default_rng(seed)
    n = len(X)
    C = np.empty((k, X.shape[1]))
    C[0] = X[rng.integers(n)]
    d2 = ((X - C[0]) ** 2).sum(1)
    for j in range(1, k):
        C[j] = X[rng.choice(n, p=d2 / d2.sum())] if d2.sum() > 0 else X[rng.integers(n)]
        d2 = np.minimum(d2, ((X - C[j]) ** 2).sum(1))
    labels = np.full(n, -1)
    sq = (X ** 2).sum(1)
    for _ in range(max_iter):
        dist = sq[:, None] - 2 * X @ C.T + (C ** 2).sum(1)[None]
        new = dist.argmin(1)
        if np.array_equal(new, labels):
            break
        labels = new
        for j in range(k):
            members = labels == j
            if members.any():
                C[j] = X[members].mean(0)
            else:
                far = int(dist[np.arange(n), labels].argmax())
                labels[far] = j
                C[j] = X[far]
    return labels


def our_kmeans(X: np.ndarray, k: int, seed: int) -> np.ndarray:
    """The k-means of :func:`certdp.pmo.partition.partition` (best of 4 k-means++ runs)."""
    from sklearn.cluster import KMeans
    return KMeans(n_clusters=k, n_init=4, random_state=seed).fit_predict(X)


KMEANS: dict[str, Callable[[np.ndarray, int, int], np.ndarray]] = {"ours": our_kmeans, "matlab": matlab_kmeans}


def _components(n: int, members: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Component sizes of the graph on the records ``members`` (mask) with edges (i, j)."""
    idx = np.flatnonzero(members)
    if not len(idx):
        return np.zeros(0, dtype=np.int64)
    pos = np.full(n, -1)
    pos[idx] = np.arange(len(idx))
    g = sp.csr_matrix((np.ones(len(i)), (pos[i], pos[j])), shape=(len(idx), len(idx)))
    return np.bincount(connected_components(g, directed=False)[1])


def counts(labels: np.ndarray, edges: np.ndarray) -> dict[str, float]:
    """Every count of the module docstring for one partition of a graph with ``edges`` (i < j)."""
    n = len(labels)
    st = Partition(np.unique(labels, return_inverse=True)[1].astype(np.int64), "").stats(edges)
    i, j = edges[:, 0], edges[:, 1]
    cut = labels[i] != labels[j]
    bnd = np.zeros(n, dtype=bool)
    bnd[i[cut]] = bnd[j[cut]] = True
    inner = ~bnd[i] & ~bnd[j]
    pieces = _components(n, ~bnd, i[inner], j[inner])
    cuts = st["cut_component_mean"], st["cut_component_max"]
    across = _components(n, bnd, i[cut], j[cut])
    big = np.bincount(labels).argmax()
    inside = (labels[i] == big) & (labels[j] == big)
    degree = np.bincount(edges.ravel(), minlength=n)
    return {"internal_mean": st["internal_mean"], "internal_max": st["subproblem_max"],
            "subset_max": int(np.bincount(labels).max()),
            "piece_mean": float(pieces.mean()) if len(pieces) else 0.0,
            "piece_max": int(pieces.max()) if len(pieces) else 0,
            "cut_mean": cuts[0], "cut_max": cuts[1],
            "cut_by_record": float((across ** 2).sum() / across.sum()) if len(across) else 0.0,
            "induced_mean": st["master_component_mean"], "induced_max": st["master_component_max"],
            "big_degree": float(degree[labels == big].mean()),
            "big_pieces": len(_components(n, labels == big, i[inside], j[inside]))}


class Instance:
    """500 records with their distance matrix, mDP graph (d < eta) and coordinates (degrees,
    in the order the code hands them to k-m-rec: longitude, latitude)."""

    def __init__(self, lonlat: np.ndarray, code_metric: bool, eta: float | None) -> None:
        self.lonlat = lonlat
        lon, lat = lonlat[:, 0], lonlat[:, 1]
        self.D = haversine(lon, lat) if code_metric else haversine(lat, lon)
        if eta is None:   # the held-out rule: the mean degree of the code's Rome instance
            pairs = np.sort(self.D[np.triu_indices(len(lon), 1)])
            k = int(round(ROME_DEGREE * len(lon) / 2))
            eta = 0.5 * (pairs[k - 1] + pairs[k])
        self.eta = float(eta)
        A = (self.D < self.eta) & ~np.eye(len(lon), dtype=bool)
        i, j = np.nonzero(np.triu(A, 1))
        self.A = A.astype(float)
        self.edges = np.column_stack([i, j]).astype(np.int64)
        self.degree = float(self.A.sum() / len(lon))

    @cached_property
    def spectral(self) -> np.ndarray:
        """The first M eigenvectors of the unnormalised Laplacian (``balancedSpectral.m``)."""
        return np.linalg.eigh(np.diag(self.A.sum(1)) - self.A)[1][:, :M]

    def features(self, method: str, adjacency: str) -> np.ndarray:
        """The rows k-means clusters for ``method`` (dv, rec, adj, bsc)."""
        if method == "dv":
            return self.D
        if method == "rec":
            return self.lonlat
        if method == "bsc":
            return self.spectral
        W = self.A + (np.eye(len(self.A)) if adjacency in ("closed", "row-norm") else 0.0)
        if adjacency == "weighted":
            W = self.A * self.D
        if adjacency == "row-norm":
            W = W / W.sum(1, keepdims=True)
        return W


def fmt(values: list[float]) -> str:
    v = np.asarray(values, dtype=float)
    return f"{v.mean():.3g} ± {1.96 * v.std():.2g}"


def measure(rows: list[list[Any]], raw: list[dict[str, Any]], part: str, label: str, metric: str,
            insts: list[Instance], method: str, adjacency: str, kmeans: str) -> None:
    t0 = time.perf_counter()
    runs = []
    for s, inst in enumerate(insts, start=1):
        lab = KMEANS[kmeans](inst.features(method, adjacency), M, s)
        runs.append(counts(lab, inst.edges))
    raw.append({"part": part, "instances": label, "metric": metric, "method": method, "adjacency": adjacency,
                "kmeans": kmeans, "eta": [i.eta for i in insts], "runs": runs})
    ref = PAPER.get(method) if part != "held out" else None
    rows.append([part, label, metric, fmt([i.eta for i in insts]), fmt([i.degree for i in insts]), method,
                 adjacency if method == "adj" else "-", kmeans]
                + [fmt([r[k] for r in runs]) for k in KEYS]
                + ["/".join(f"{v:g}" for v in ref) if ref else None])
    print(f"{part} {label} {metric} {method} {adjacency} {kmeans}: {time.perf_counter() - t0:.1f} s", flush=True)


def check_ours(paper_code: Path, insts: list[Instance]) -> None:
    """The ``ours`` k-means on closed adjacency rows and on distance rows is the library's
    kmeans-adj and kmeans-dv: same labels on the code's instance (rome-500-code)."""
    for s, inst in enumerate(insts[:2], start=1):
        space = code_instance(f"rome-500-code-s{s}", paper_code)
        for method in ("dv", "adj"):
            lib = partition(space, f"kmeans-{method}", M, seed=s).labels
            ours = our_kmeans(inst.features(method, "closed"), M, s)
            if not _same_partition(ours, lib):
                raise AssertionError(f"ours != certdp kmeans-{method} on rome-500-code-s{s}")


def saved_run(paper_code: Path, saved: np.ndarray, inst: Instance) -> str:
    """How the repository's saved Rome run matches our graph of the code's instance, and which
    partitioner's k-means it is a fixed point of."""
    from scipy.io import loadmat

    i, j = inst.edges[:, 0], inst.edges[:, 1]
    cut = saved[i] != saved[j]
    ours = np.unique(np.concatenate([i[cut], j[cut]]))
    stored = np.sort(loadmat(paper_code / "rome/intermediate/node_boundary.mat")["node_boundary"].ravel() - 1)
    master = loadmat(paper_code / "rome/intermediate/matlab.mat", squeeze_me=True,
                     struct_as_record=False)["masteragent"].adjacence_matrix_boundary
    mi, mj = np.nonzero(np.triu(np.asarray(master), 1))
    same_master = {(int(x), int(y)) for x, y in zip(mi, mj)} == {(int(x), int(y)) for x, y in zip(i[cut], j[cut])}
    own = []
    for method in ("dv", "rec", "adj", "bsc"):
        X = inst.features(method, "open")
        C = np.stack([X[saved == c].mean(0) for c in range(M)])
        nearest = ((X[:, None, :] - C[None]) ** 2).sum(2).argmin(1)
        own.append(f"{method} {int((nearest == saved).sum())}")
    return (f"boundary records as node_boundary.mat: {np.array_equal(ours, stored)}; cut edges as matlab.mat's "
            f"master: {same_master} ({int(cut.sum())}); records nearest their own subset's centroid: "
            + ", ".join(own) + " of 500")


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether labels ``a`` and ``b`` name the same subsets."""
    pairs = set(zip(a.tolist(), b.tolist()))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


def main() -> None:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):   # 500 x 500 problems: one thread is faster than contended ones
        run()


def run() -> None:
    from scipy.io import loadmat

    ap = argparse.ArgumentParser()
    ap.add_argument("--paper-code", type=Path, required=True,
                    help="the 'MATLAB code/Dataset' folder of the paper's repository")
    ap.add_argument("--heldout", type=Path, default=None, help="a folder of NAME_nodes.csv (id, lon, lat)")
    ap.add_argument("--networks", nargs="+", default=["birmingham", "chicago", "chicagosketch", "philadelphia"])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--name", default="partition_readings")
    a = output_args(ap).parse_args()
    S = a.seeds
    lonlat = np.genfromtxt(a.paper_code / "rome/raw/nodes_rome.csv", delimiter=",", skip_header=1, usecols=(2, 1))
    fixed = loadmat(a.paper_code / "rome/intermediate/node_in_target.mat")["node_in_target"].ravel().astype(int) - 1
    draws = [np.random.default_rng(s).choice(len(lonlat), 500, replace=False) for s in range(1, S + 1)]
    rows: list[list[Any]] = []
    raw: list[dict[str, Any]] = []

    code = [Instance(lonlat[fixed], True, 2.0)] * S
    check_ours(a.paper_code, code)
    e = code[0].edges
    implied = int(MDPGraph(500, e, code[0].D[e[:, 0], e[:, 1]]).implied_edges().sum())
    saved = loadmat(a.paper_code / "rome/intermediate/cluster_idx.mat")["cluster_idx"].ravel() - 1
    saved_notes = saved_run(a.paper_code, saved, code[0])
    st = counts(saved, code[0].edges)
    raw.append({"part": "saved run", "runs": [st]})
    rows.append(["saved run", "code", "code", "2", f"{code[0].degree:.3g}", "dv (cluster_idx.mat)", "-", "-"]
                + [f"{st[k]:.3g}" for k in KEYS] + ["/".join(f"{v:g}" for v in PAPER["dv"])])

    # the code's instance and metric: every partitioner, every adjacency, both k-means
    for method in ("dv", "rec", "bsc"):
        for km in KMEANS:
            measure(rows, raw, "code", "code", "code", code, method, "-", km)
    for adjacency in ("open", "closed", "weighted", "row-norm"):
        for km in KMEANS:
            measure(rows, raw, "code", "code", "code", code, "adj", adjacency, km)
    # other instances and the true metric
    for label, metric, insts in (("draw", "code", [Instance(lonlat[r], True, 2.0) for r in draws]),
                                 ("code", "true", [Instance(lonlat[fixed], False, 2.0)] * S),
                                 ("draw", "true", [Instance(lonlat[r], False, 2.0) for r in draws])):
        for method, adjacency in (("dv", "-"), ("rec", "-"), ("adj", "open"), ("adj", "closed")):
            for km in KMEANS:
                measure(rows, raw, "instance", label, metric, insts, method, adjacency, km)
    # eta
    for eta in (1.0, 1.5, 3.0, 4.0, 5.0):
        insts = [Instance(lonlat[fixed], True, eta)] * S
        for method, adjacency in (("dv", "-"), ("rec", "-"), ("adj", "open"), ("bsc", "-")):
            measure(rows, raw, f"eta {eta:g}", "code", "code", insts, method, adjacency, "matlab")
    # held out: never tuned on; eta from the Rome instance's mean degree
    if a.heldout is not None:
        for net in a.networks:
            nodes = np.genfromtxt(a.heldout / f"{net}_nodes.csv", delimiter=",", names=True)
            ll = np.column_stack([nodes["lon"], nodes["lat"]])
            insts = [Instance(ll[np.random.default_rng(s).choice(len(ll), 500, replace=False)], False, None)
                     for s in range(1, S + 1)]
            for method, adjacency, km in (("dv", "-", "ours"), ("rec", "-", "ours"), ("adj", "closed", "ours"),
                                          ("adj", "open", "matlab")):
                measure(rows, raw, "held out", net, "true", insts, method, adjacency, km)

    write_table(a.name, "Readings of paper 000's Tables 1-2 (k-m-adj, k-m-rec) on its code's Rome data, M = 25",
                ["part", "instances", "metric", "eta (km)", "mean degree", "partitioner", "adjacency", "k-means",
                 *COLUMNS, "paper (road) internal mean/max, comp mean/max"],
                rows, notes=[
                    "sizes in records; every figure mean ± 1.96 sd over 10 instances (code: the code's 500 nodes, "
                    "k-means seed S; draw: 500 of the 43,160 nodes, draw S and seed S); see the module docstring "
                    "for each reading",
                    "internal mean over all M subsets (agentCreation.m), internal max, subset max (records of the "
                    "largest subset), piece = a subset's internal records split into connected pieces "
                    "(Property 3.1); cut comp = components of the cut-edge graph (the code's master), by record = "
                    "weighted by records; induced = graph induced on the boundary records (Eq. 25)",
                    "largest subset: mean degree of its records and the number of connected pieces of the mDP "
                    "graph it is made of",
                    "saved run: the repository's own Rome partition (rome/intermediate/cluster_idx.mat); "
                    + saved_notes,
                    f"Property 3.2 implies {implied} of the code instance's {len(e)} edges, so the master over "
                    "the cut edges it does not imply is the cut-edge master",
                    "held out: $CERTDP_HELDOUT-style road networks, 500 nodes per draw, true Haversine, eta set "
                    f"per draw to the mean degree {ROME_DEGREE} of the code's Rome instance"],
                raw=raw, args=a)


if __name__ == "__main__":
    main()
