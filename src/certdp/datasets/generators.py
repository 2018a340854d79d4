"""Generated datasets: grid maps (paper 000 section 4.1 (2)), Gaussian points ((4)), and grids of
cells over a latitude/longitude box (an area of the map)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _validate as V
from ..randomness import RNGLike, as_generator
from ..space import EARTH_RADIUS_KM
from .base import Dataset

KM_PER_DEGREE = EARTH_RADIUS_KM * np.pi / 180.0
"""Kilometres per degree of latitude (and of longitude at the equator) on the sphere the
Haversine distance uses."""


@dataclass(frozen=True)
class GridTravel:
    """Travel on a rectangular street lattice through the cell centres: path distances are
    Manhattan distances between cell centres (``cell`` per step)."""

    rows: int
    cols: int
    cell: float

    def n_destinations_available(self) -> int:
        """Every cell can be a destination."""
        return self.rows * self.cols

    def sample_destinations(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` distinct cells drawn with ``rng``, sorted."""
        return np.sort(rng.choice(self.rows * self.cols, size=n, replace=False))

    def record_to_destination(self, destinations: np.ndarray) -> np.ndarray:
        """(N, T) Manhattan path distances along the lattice from every cell to each destination."""
        idx = np.arange(self.rows * self.cols)
        r, c = np.divmod(idx, self.cols)
        dr, dc = np.divmod(np.asarray(destinations, dtype=np.int64), self.cols)
        return (np.abs(r[:, None] - dr[None, :]) + np.abs(c[:, None] - dc[None, :])) * self.cell


def grid(rows: int, cols: int, cell: float = 1.0) -> Dataset:
    """A rows x cols grid map of square cells; each record is a cell centre (Euclidean)."""
    rows = V.int_in_range("rows", rows, 1)
    cols = V.int_in_range("cols", cols, 1)
    cell = V.positive_float("cell", cell)
    if rows * cols < 2:
        raise ValueError("a grid needs at least two cells")
    V.fits_in_memory(f"a grid of {rows} x {cols} = {rows * cols:,} records", 48.0 * rows * cols)
    r, c = np.divmod(np.arange(rows * cols), cols)
    pts = np.column_stack([(c + 0.5) * cell, (r + 0.5) * cell]).astype(np.float64)
    return Dataset(points=pts, metric="euclidean", name=f"grid:{rows}x{cols}@{cell:g}",
                   travel=GridTravel(rows, cols, cell), unit="km")


def gaussian(n: int, dim: int = 3, seed: RNGLike = None) -> Dataset:
    """n points drawn from a standard multivariate Gaussian in ``dim`` dimensions (Euclidean)."""
    n = V.int_in_range("n", n, 2)
    dim = V.int_in_range("dim", dim, 1)
    V.fits_in_memory(f"{n:,} Gaussian points in {dim} dimensions", 8.0 * n * dim)
    pts = as_generator(seed).standard_normal((n, dim))
    return Dataset(points=pts, metric="euclidean", name=f"gaussian:{n}:{dim}")


def planar(points: np.ndarray, name: str = "planar", unit: str = "") -> Dataset:
    """Records given as planar (or any Euclidean) coordinates."""
    pts = V.finite_array("points", points, ndim=2)
    return Dataset(points=pts, metric="euclidean", name=name, unit=unit)


def latlon(points: np.ndarray, name: str = "latlon") -> Dataset:
    """Records given as (lat, lon) degrees; distances are Haversine, in km."""
    pts = V.finite_array("points", points, ndim=2)
    if pts.shape[1] != 2:
        raise ValueError(f"points must be (lat, lon) pairs, got dimension {pts.shape[1]}")
    return Dataset(points=pts, metric="haversine", name=name, unit="km")


def area_grid(south: float, west: float, north: float, east: float, cell: float) -> Dataset:
    """Square cells of ``cell`` km over the box [south, north] x [west, east] (degrees); each
    record is a cell centre as (lat, lon), with Haversine distances in km.

    Cells are ``cell / KM_PER_DEGREE`` degrees of latitude high and as many degrees of longitude
    as make ``cell`` km at the box's middle latitude; the last row and column may reach past
    the box. Travel between cells is along the lattice (Manhattan, ``cell`` km a step), as on
    :func:`grid`, so the travel cost of paper 000 Eq. 48 is available.

    >>> ds = area_grid(60.16, 24.93, 60.17, 24.95, 0.5)
    >>> ds.n_records, ds.metric, ds.points[0].round(4).tolist()
    (9, 'haversine', [60.1622, 24.9345])
    """
    south, west, north, east = (V.finite_float(name, v) for name, v in
                                (("south", south), ("west", west), ("north", north), ("east", east)))
    cell = V.positive_float("cell", cell)
    if not -90 <= south < north <= 90:
        raise ValueError(f"the area needs -90 <= south < north <= 90, got south={south}, north={north}")
    if not -180 <= west < east <= 180:
        raise ValueError(f"the area needs -180 <= west < east <= 180, got west={west}, east={east}")
    dlat = cell / KM_PER_DEGREE
    coslat = float(np.cos(np.radians(0.5 * (south + north))))
    if coslat < 1e-6:
        raise ValueError("the area reaches a pole, where cells of equal size in km cannot be laid out")
    dlon = dlat / coslat
    rows = max(1, int(np.ceil((north - south) / dlat - 1e-9)))
    cols = max(1, int(np.ceil((east - west) / dlon - 1e-9)))
    if rows * cols < 2:
        raise ValueError(f"the area holds a single cell of {cell:g} km; use smaller cells")
    V.fits_in_memory(f"an area grid of {rows} x {cols} = {rows * cols:,} cells", 48.0 * rows * cols)
    r, c = np.divmod(np.arange(rows * cols), cols)
    pts = np.column_stack([south + (r + 0.5) * dlat, west + (c + 0.5) * dlon])
    if np.any(np.abs(pts[:, 0]) > 90) or np.any(np.abs(pts[:, 1]) > 180):
        raise ValueError("the area's cells reach past latitude +-90 or longitude +-180; shrink the box")
    return Dataset(points=pts, metric="haversine",
                   name=f"area:{south:g},{west:g},{north:g},{east:g}:{cell:g}",
                   travel=GridTravel(rows, cols, cell), unit="km")
