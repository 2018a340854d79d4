"""Dataset specifications as used on the command line.

=================================  ==========================================================
``grid:ROWSxCOLS``                 grid map, cell size from ``cell`` (km)
``gaussian:N:DIM``                 N standard Gaussian points in DIM dimensions
``road:NODES.csv,EDGES.csv:N``     N nodes sampled from a road network (Haversine, km)
``embedding:FILE:N``               N words sampled from ``FILE`` (.npy + .txt, or word2vec .bin)
=================================  ==========================================================
"""

from __future__ import annotations

import re

from ..randomness import RNGLike
from .base import Dataset
from .embeddings import embeddings
from .generators import gaussian, grid
from .road import road_network

SPEC_FORMS = ("grid:ROWSxCOLS", "gaussian:N:DIM", "road:NODES.csv,EDGES.csv:N", "embedding:FILE:N")


def _int(text: str, what: str, spec: str, lo: int) -> int:
    try:
        v = int(text)
    except ValueError:
        raise ValueError(f"dataset spec {spec!r}: {what} must be an integer, got {text!r}") from None
    if v < lo:
        raise ValueError(f"dataset spec {spec!r}: {what} must be >= {lo}, got {v}")
    return v


def parse_dataset(spec: str, *, cell: float = 1.0, seed: RNGLike = None) -> Dataset:
    """Build the dataset named by ``spec`` (see the module docstring for the forms)."""
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
        parts = files.split(",")
        if len(parts) != 2 or not n:
            raise ValueError(f"dataset spec {spec!r}: expected road:NODES.csv,EDGES.csv:N")
        return road_network(parts[0], parts[1], _int(n, "N", spec, 2), seed)
    if kind == "embedding":
        path, _, n = rest.rpartition(":")
        if not path or not n:
            raise ValueError(f"dataset spec {spec!r}: expected embedding:FILE:N")
        return embeddings(path, _int(n, "N", spec, 2), seed)
    raise ValueError(f"unknown dataset kind {kind!r} in {spec!r}; expected one of {', '.join(SPEC_FORMS)}")
