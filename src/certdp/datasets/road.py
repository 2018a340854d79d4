"""Road networks from node and edge CSV files (the format of ``shared/data/helsinki``).

Nodes: columns ``id,lon,lat``. Edges: ``u,v,length_m`` (undirected, lengths in metres).
Records are a seeded sample of nodes; their privacy distance is Haversine in km (paper 000
section 4.1 (1)); travel distances are shortest paths on the road graph, in km.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components, dijkstra

from .. import _validate as V
from .._io import input_file
from ..randomness import RNGLike, as_generator
from .base import Dataset

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True, eq=False)
class RoadNetwork:
    """A road graph: node ids, (lat, lon) coordinates, and a symmetric CSR matrix of edge
    lengths in km."""

    ids: np.ndarray
    latlon: np.ndarray
    graph: csr_matrix = field(repr=False)

    @property
    def n_nodes(self) -> int:
        """The number of nodes."""
        return int(self.ids.shape[0])

    def path_distances(self, sources: np.ndarray, limit: float = np.inf) -> np.ndarray:
        """(len(sources), n_nodes) shortest-path distances in km (Dijkstra)."""
        return dijkstra(self.graph, directed=False, indices=np.asarray(sources), limit=limit)


def _read_csv(path: str | Path, columns: tuple[str, ...], what: str) -> pd.DataFrame:
    import pandas as pd   # imported here: only road networks read CSV files this way
    p = input_file(path, f"{what} file")
    try:
        df = pd.read_csv(p)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{what} file {p} is empty") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ValueError(f"{what} file {p} is not a valid CSV: {exc}") from None
    except OSError as exc:
        raise ValueError(f"cannot read {what} file {p}: {exc.strerror or exc}") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what} file {p} must have columns {','.join(columns)}; missing {missing}")
    if len(df) == 0:
        raise ValueError(f"{what} file {p} has a header but no rows")
    df = df[list(columns)]
    if df.isna().any().any():
        raise ValueError(f"{what} file {p} has empty or malformed values in {list(df.columns[df.isna().any()])}")
    return df


def load_road_network(nodes_csv: str | Path, edges_csv: str | Path) -> RoadNetwork:
    """Read a road network; edge lengths become km. Raises ``ValueError`` on malformed files."""
    import pandas as pd   # imported here, as in _read_csv
    nodes = _read_csv(nodes_csv, ("id", "lon", "lat"), "nodes")
    edges = _read_csv(edges_csv, ("u", "v", "length_m"), "edges")
    try:
        ids = nodes["id"].to_numpy()
        lat = nodes["lat"].to_numpy(dtype=np.float64)
        lon = nodes["lon"].to_numpy(dtype=np.float64)
        length = edges["length_m"].to_numpy(dtype=np.float64) / 1000.0
    except (TypeError, ValueError) as exc:
        raise ValueError(f"road network files have non-numeric coordinates or lengths: {exc}") from None
    if len(np.unique(ids.astype(str))) != len(ids):
        raise ValueError(f"nodes file {nodes_csv} repeats node ids")
    if np.any(np.abs(lat) > 90) or np.any(np.abs(lon) > 180):
        raise ValueError(f"nodes file {nodes_csv} has coordinates outside lat [-90, 90], lon [-180, 180]")
    if not np.all(np.isfinite(length)) or np.any(length < 0):
        raise ValueError(f"edges file {edges_csv} has negative or non-finite lengths")
    # ids are matched as the text the files hold (a column pandas read as numbers in one file and
    # as text in the other still names the same nodes)
    pos = pd.Series(np.arange(len(ids)), index=ids.astype(str))
    ends = edges[["u", "v"]].astype(str)
    missing = pd.unique(ends.to_numpy().ravel())
    missing = missing[~pd.Index(missing).isin(pos.index)]
    if len(missing):
        shown = ", ".join(repr(x) for x in missing[:5])
        raise ValueError(f"edges file {edges_csv} names {len(missing)} node ids missing from {nodes_csv} "
                         f"(e.g. {shown})")
    u = pos.loc[ends["u"].to_numpy()].to_numpy()
    v = pos.loc[ends["v"].to_numpy()].to_numpy()
    n = len(ids)
    keep = u != v
    u, v, length = u[keep], v[keep], length[keep]
    # Zero-length edges would be dropped by the sparse format; give them a tiny positive length.
    length = np.maximum(length, 1e-9)
    # Symmetric, keeping the shortest of parallel edges.
    rows = np.concatenate([u, v])
    cols = np.concatenate([v, u])
    vals = np.concatenate([length, length])
    order = np.lexsort((vals, cols, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    first = np.ones(len(rows), dtype=bool)
    first[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])
    g = csr_matrix((vals[first], (rows[first], cols[first])), shape=(n, n))
    return RoadNetwork(ids=ids, latlon=np.column_stack([lat, lon]), graph=g)


@dataclass(frozen=True, eq=False)
class RoadTravel:
    """Travel model on a road network for a sample of record nodes."""

    network: RoadNetwork = field(repr=False)
    record_nodes: np.ndarray
    candidate_destinations: np.ndarray

    def n_destinations_available(self) -> int:
        """The nodes of the largest component that can be destinations."""
        return int(len(self.candidate_destinations))

    def sample_destinations(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` distinct destination nodes drawn with ``rng``, sorted."""
        return np.sort(rng.choice(self.candidate_destinations, size=n, replace=False))

    def record_to_destination(self, destinations: np.ndarray) -> np.ndarray:
        """(N, T) shortest-path distances in km from every record node to each destination."""
        dist = self.network.path_distances(np.asarray(destinations, dtype=np.int64))
        return dist[:, self.record_nodes].T.copy()


def road_network(nodes_csv: str | Path, edges_csv: str | Path, n: int | None = None,
                 seed: RNGLike = None, network: RoadNetwork | None = None,
                 within: np.ndarray | None = None) -> Dataset:
    """Records = a seeded sample of ``n`` nodes (all nodes when ``n`` is None) of the largest
    connected component, one per distinct coordinate. Privacy metric: Haversine (km).
    ``within`` (node indices) restricts the records and the travel destinations to an area of
    the network; travel still runs on the whole network."""
    net = network if network is not None else load_road_network(nodes_csv, edges_csv)
    _, comp = connected_components(net.graph, directed=False)
    big = np.argmax(np.bincount(comp))
    cand = np.flatnonzero(comp == big)
    if within is not None:
        cand = np.intersect1d(cand, np.asarray(within, dtype=np.int64))
    # one node per distinct coordinate: records must be distinct points of the metric
    _, first = np.unique(net.latlon[cand], axis=0, return_index=True)
    cand = np.sort(cand[first])
    if n is None:
        chosen = cand
    else:
        n = V.int_in_range("n", n, 2)
        if n > len(cand):
            raise ValueError(f"n={n} exceeds the {len(cand)} distinct nodes of the road network's largest component")
        chosen = np.sort(as_generator(seed).choice(cand, size=n, replace=False))
    travel = RoadTravel(network=net, record_nodes=chosen, candidate_destinations=cand)
    return Dataset(points=net.latlon[chosen], metric="haversine",
                   name=f"road:{Path(str(nodes_csv)).stem}:{len(chosen)}",
                   labels=tuple(str(x) for x in net.ids[chosen]), travel=travel, unit="km")
