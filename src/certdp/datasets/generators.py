"""Generated datasets: grid maps (paper 000 section 4.1 (2)) and Gaussian points ((4))."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _validate as V
from ..randomness import RNGLike, as_generator
from .base import Dataset


@dataclass(frozen=True)
class GridTravel:
    """Travel on a rectangular street lattice through the cell centres: path distances are
    Manhattan distances between cell centres (``cell`` per step)."""

    rows: int
    cols: int
    cell: float

    def n_destinations_available(self) -> int:
        return self.rows * self.cols

    def sample_destinations(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.sort(rng.choice(self.rows * self.cols, size=n, replace=False))

    def record_to_destination(self, destinations: np.ndarray) -> np.ndarray:
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
