"""Dataset specifications as used on the command line.

=================================  ==========================================================
``grid:ROWSxCOLS``                 grid map, cell size from ``cell`` (km)
``gaussian:N:DIM``                 N standard Gaussian points in DIM dimensions
``road:NODES.csv,EDGES.csv[:N]``  N nodes sampled from a road network (Haversine, km); every
                                   node of its largest component, one per coordinate, without N
``area:S,W,N,E:CELL``              cells of CELL km over the lat/lon box south, west, north,
                                   east (degrees); Haversine, km
``embedding:FILE:N``               N words sampled from ``FILE`` (.npy + .txt, or word2vec .bin)
=================================  ==========================================================
"""

from __future__ import annotations

import re

from ..randomness import RNGLike
from .base import Dataset
from .embeddings import embeddings
from .generators import area_grid, gaussian, grid
from .road import road_network

SPEC_FORMS = ("grid:ROWSxCOLS", "gaussian:N:DIM", "road:NODES.csv,EDGES.csv[:N]", "area:S,W,N,E:CELL",
              "embedding:FILE:N")


def _int(text: str, what: str, spec: str, lo: int) -> int:
    try:
        v = int(text)
    except ValueError:
        raise ValueError(f"dataset spec {spec!r}: {what} must be an integer, got {text!r}") from None
    if v < lo:
        raise ValueError(f"dataset spec {spec!r}: {what} must be >= {lo}, got {v}")
    return v


def _float(text: str, what: str, spec: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"dataset spec {spec!r}: {what} must be a number, got {text!r}") from None


def parse_dataset(spec: str, *, cell: float = 1.0, seed: RNGLike = None) -> Dataset:
    """Build the dataset named by ``spec`` (see the module docstring for the forms).

    >>> parse_dataset("grid:3x4").n_records
    12
    >>> parse_dataset("area:60.16,24.93,60.17,24.95:0.5").metric
    'haversine'
    """
    if not isinstance(spec, str) or ":" not in spec:
        raise ValueError(f"unknown dataset spec {spec!r}; expected one of {', '.join(SPEC_FORMS)}")
    kind, rest = spec.split(":", 1)
    if kind == "grid":
        m = re.fullmatch(r"(\d+)x(\d+)", rest)
        if not m:
            raise ValueError(f"dataset spec {spec!r}: expected grid:ROWSxCOLS, e.g. grid:20x25")
        return grid(int(m.group(1)), int(m.group(2)), cell)
    if kind == "gaussian":
        parts = rest.split(":")
        if len(parts) != 2:
            raise ValueError(f"dataset spec {spec!r}: expected gaussian:N:DIM, e.g. gaussian:500:3")
        return gaussian(_int(parts[0], "N", spec, 2), _int(parts[1], "DIM", spec, 1), seed)
    if kind == "road":
        files, _, n = rest.rpartition(":")
        if not files or "," in n:          # no ':N': every node
            files, n = rest, ""
        parts = files.split(",")
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"dataset spec {spec!r}: expected road:NODES.csv,EDGES.csv or road:NODES.csv,EDGES.csv:N")
        return road_network(parts[0], parts[1], _int(n, "N", spec, 2) if n else None, seed)
    if kind == "area":
        box, _, size = rest.rpartition(":")
        edges = box.split(",")
        if len(edges) != 4 or not size:
            raise ValueError(f"dataset spec {spec!r}: expected area:SOUTH,WEST,NORTH,EAST:CELL_KM, "
                             "e.g. area:60.16,24.93,60.18,24.96:0.25")
        south, west, north, east = (_float(t, what, spec) for t, what in zip(edges, ("SOUTH", "WEST", "NORTH", "EAST")))
        return area_grid(south, west, north, east, _float(size, "CELL_KM", spec))
    if kind == "embedding":
        path, _, n = rest.rpartition(":")
        if not path or not n:
            raise ValueError(f"dataset spec {spec!r}: expected embedding:FILE:N")
        return embeddings(path, _int(n, "N", spec, 2), seed)
    raise ValueError(f"unknown dataset kind {kind!r} in {spec!r}; expected one of {', '.join(SPEC_FORMS)}")
