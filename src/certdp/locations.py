"""Locations in, perturbed locations out: a certified location obfuscator for lat/lon tables.

A location-privacy engineer has a table of points (a pandas DataFrame with latitude and
longitude columns, or a GeoDataFrame of points where geopandas is installed) and a public
*area*: a box laid out in cells (``area:SOUTH,WEST,NORTH,EAST:CELL_KM``), a road network in the
Helsinki CSV format (``road:NODES.csv,EDGES.csv`` or ``...:N``), or a table of locations of
their own. :class:`LocationObfuscator` builds a certified mechanism over the area's locations
with :func:`certdp.solve` (or loads one from a mechanism file, which is audited on loading) and
returns the table with every point replaced by a perturbed location, same index, same columns.

What is protected, exactly
--------------------------
Every point is first *snapped* to its nearest location of the area (Haversine distance);
:meth:`LocationObfuscator.snap` shows, for each point, the location it is snapped to and the
snapping distance in km. The mechanism then draws an output location for that location. The
guarantee is between snapped locations: for locations s, s' within ``eta`` km of each other and
every output o, ``Pr[o | s] <= exp(epsilon d(s, s')) Pr[o | s']`` (checked exactly, on every
such pair, before anything is returned). For two raw points x, x' snapped to s, s', the
triangle inequality gives d(s, s') <= d(x, x') + snap(x) + snap(x'), so the bound holds with
d(x, x') + 2 ``max_snap_km`` in place of d(s, s'). A point farther than ``max_snap_km`` from
every location is outside the area: :meth:`~LocationObfuscator.transform` refuses it (ValueError
naming the row) rather than snap it across the map.

The mechanism depends only on the public area, never on the points: :meth:`fit` ignores its
``X`` (accepted so that the obfuscator fits a scikit-learn ``Pipeline``). Draws use the
operating system's secure randomness unless ``rng`` is an int or a numpy Generator.

>>> import pandas as pd
>>> obf = LocationObfuscator("area:60.160,24.930,60.175,24.955:0.5", epsilon=4.0, eta=1.0,
...                          method="expmech", seed=0, rng=1)
>>> trips = pd.DataFrame({"lat": [60.1632, 60.1701], "lon": [24.9402, 24.9511]}, index=["a", "b"])
>>> out = obf.fit_transform(trips)
>>> list(out.index), list(out.columns)
(['a', 'b'], ['lat', 'lon'])
>>> obf.snap(trips)["location"].tolist()
[1, 8]
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
from scipy.spatial import cKDTree
from sklearn.base import BaseEstimator, TransformerMixin

from . import _validate as V
from .datasets import Dataset, build_space, latlon, parse_dataset
from .datasets.generators import KM_PER_DEGREE
from .mechanism import Mechanism, SolveResult
from .progress import Progress
from .randomness import RNGLike, as_generator
from .solve import solve
from .space import haversine_km

__all__ = ["LocationObfuscator"]

log = logging.getLogger(__name__)

SAMPLED_METHODS = ("madlib", "laplace")
"""Methods whose mechanism has no matrix (it is sampled by adding noise): an obfuscator needs one."""


def _unit_vectors(latlon_deg: np.ndarray) -> np.ndarray:
    lat = np.radians(latlon_deg[:, 0])
    lon = np.radians(latlon_deg[:, 1])
    return np.column_stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])


def _is_geoframe(X: Any) -> bool:
    """A GeoDataFrame, recognised without importing geopandas (an optional package)."""
    return type(X).__module__.startswith("geopandas") and hasattr(X, "geometry")


def _area_dataset(area: Any, seed: RNGLike) -> Dataset:
    """The area as a dataset of (lat, lon) locations with Haversine distances."""
    if isinstance(area, str):
        kind = area.split(":", 1)[0]
        if kind not in ("area", "road"):
            raise ValueError(f"area must be 'area:SOUTH,WEST,NORTH,EAST:CELL_KM' or 'road:NODES.csv,EDGES.csv[:N]', "
                             f"got {area!r}")
        return parse_dataset(area, seed=seed)
    if isinstance(area, Dataset):
        if area.metric != "haversine":
            raise ValueError("area must hold (lat, lon) locations with the haversine metric, "
                             f"got metric {area.metric!r}")
        return area
    if isinstance(area, pd.DataFrame):
        pts = _frame_latlon(area, "lat", "lon", "area")
        if len(np.unique(pts, axis=0)) != len(pts):
            raise ValueError("area: the table of locations repeats a location; give each place once")
        labels = tuple(str(i) for i in area.index)
        ds = latlon(pts, name=f"locations:{len(pts)}")
        return Dataset(points=ds.points, metric=ds.metric, name=ds.name, labels=labels, unit="km")
    raise TypeError(f"area must be a dataset spec (area:... or road:...), a Dataset or a DataFrame of locations, "
                    f"got {type(area).__name__}")


def _frame_latlon(X: Any, lat: str, lon: str, what: str) -> np.ndarray:
    """(n, 2) float (lat, lon) degrees from a DataFrame's columns or a GeoDataFrame's points."""
    if _is_geoframe(X):
        crs = getattr(X, "crs", None)
        if crs is not None and not crs.equals("EPSG:4326"):
            raise ValueError(f"{what}: the GeoDataFrame's CRS is {crs}; convert it with .to_crs('EPSG:4326') first")
        geom = X.geometry
        if len(geom) and not bool((geom.geom_type == "Point").all()):
            raise ValueError(f"{what}: every geometry must be a Point")
        pts = np.column_stack([geom.y.to_numpy(dtype=np.float64), geom.x.to_numpy(dtype=np.float64)]) \
            if len(geom) else np.empty((0, 2))
    elif isinstance(X, pd.DataFrame):
        missing = [c for c in (lat, lon) if c not in X.columns]
        if missing:
            raise ValueError(f"{what}: no column {', '.join(repr(c) for c in missing)} (columns: {list(X.columns)}); "
                             "name the latitude and longitude columns with lat= and lon=")
        try:
            pts = X[[lat, lon]].to_numpy(dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{what}: columns {lat!r} and {lon!r} must be numbers (degrees)") from None
    else:
        raise TypeError(f"{what} must be a pandas DataFrame (or a geopandas GeoDataFrame), got {type(X).__name__}")
    bad = ~np.all(np.isfinite(pts), axis=1)
    if np.any(bad):
        raise ValueError(f"{what}: row {X.index[int(np.argmax(bad))]!r} has a missing or non-finite coordinate")
    out = (np.abs(pts[:, 0]) > 90) | (np.abs(pts[:, 1]) > 180)
    if np.any(out):
        raise ValueError(f"{what}: row {X.index[int(np.argmax(out))]!r} is not (lat, lon) in degrees "
                         "(|lat| <= 90, |lon| <= 180)")
    return pts


class LocationObfuscator(TransformerMixin, BaseEstimator):
    """Perturb lat/lon points with a certified epsilon-mDP mechanism over an area's locations.

    Args:
        area: the public area: ``'area:SOUTH,WEST,NORTH,EAST:CELL_KM'`` (cells over a box),
            ``'road:NODES.csv,EDGES.csv'`` (every node of a road network's largest component;
            ``...:N`` samples N of them with ``seed``), a :class:`~certdp.datasets.Dataset`
            with the haversine metric, or a DataFrame of locations (``lat``/``lon`` columns,
            its index naming them). Not needed with ``mechanism``.
        epsilon: privacy budget per km.
        eta: neighbour threshold in km: locations within eta of each other are protected
            (``inf``: every pair).
        method: how :func:`certdp.solve` builds the mechanism (default ``'outputs'``, the
            certified decomposition; ``'lp'``, ``'expmech'``, ... are as in ``certdp solve``).
        options: the method's options (e.g. ``{"gap": 1e-3}``), checked by :func:`certdp.solve`.
        cost: ``'distance'`` (km between location and output) or ``'travel'`` (paper 000
            Eq. 48, along the road network or the area's lattice).
        outputs: K output locations sampled from the area's locations with ``seed``
            (default: every location is a possible output).
        mechanism: a mechanism file (or :class:`~certdp.Mechanism`) to use instead of building
            one; its records must be (lat, lon) locations with the haversine metric.
        max_snap_km: the largest snapping distance of a point inside the area. Default: half
            a cell's diagonal for an area of cells (every point of the box is inside), else the
            largest distance from a location to its nearest other location.
        lat: the latitude column of the tables (DataFrames).
        lon: the longitude column.
        seed: seed of what building the mechanism samples (outputs, destinations, nodes);
            None draws one and records it in the mechanism.
        rng: randomness of the draws: None (default) is the operating system's secure
            generator; an int or a numpy Generator gives reproducible draws.
        progress: a callback for the build's progress (see :mod:`certdp.progress`).

    Attributes (after :meth:`fit`):
        mechanism_: the certified :class:`~certdp.Mechanism`.
        result_: the :class:`~certdp.SolveResult` of the build (None when loaded from a file).
        locations_: DataFrame of the area's locations (``lat``, ``lon``, ``label``), one row
            per record of the mechanism.
        outputs_: DataFrame of the output locations (``lat``, ``lon``), one row per output.
        max_snap_km_: the snapping limit in force.
    """

    def __init__(self, area: Any = None, *, epsilon: float | None = None, eta: float | None = None,
                 method: str = "outputs", options: Mapping[str, Any] | None = None, cost: str = "distance",
                 outputs: int | None = None, mechanism: str | Path | Mechanism | None = None,
                 max_snap_km: float | None = None, lat: str = "lat", lon: str = "lon", seed: int | None = None,
                 rng: RNGLike = None, progress: Progress | None = None) -> None:
        self.area = area
        self.epsilon = epsilon
        self.eta = eta
        self.method = method
        self.options = options
        self.cost = cost
        self.outputs = outputs
        self.mechanism = mechanism
        self.max_snap_km = max_snap_km
        self.lat = lat
        self.lon = lon
        self.seed = seed
        self.rng = rng
        self.progress = progress

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any = None, y: Any = None) -> "LocationObfuscator":
        """Build (or load) the mechanism from the area. ``X`` and ``y`` are ignored: the
        mechanism must not depend on the points it protects."""
        labels: tuple[str, ...] | None
        points: np.ndarray | None
        if self.mechanism is not None:
            mech = self.mechanism if isinstance(self.mechanism, Mechanism) else Mechanism.load(self.mechanism)
            g = mech.geometry
            if g is None or g.metric != "haversine" or g.points is None:
                raise ValueError("mechanism: its records must be (lat, lon) locations with the haversine metric")
            if mech.output_points is None:
                raise ValueError("mechanism: its outputs are not locations of the area (no output coordinates)")
            self.result_: SolveResult | None = None
            points, labels, cell = g.points, mech.metadata.get("labels"), None
            labels = tuple(labels) if isinstance(labels, list) and len(labels) == len(points) else None
        else:
            if self.area is None:
                raise ValueError("area is required unless a mechanism file is given")
            if self.epsilon is None or self.eta is None:
                raise ValueError("epsilon and eta are required to build a mechanism (or give mechanism=FILE)")
            if self.method in SAMPLED_METHODS:
                raise ValueError(f"method {self.method!r} gives no matrix to draw from; choose a method that does "
                                 "(outputs, lp, benders, expmech, constopt, spanner, optmech)")
            ds = _area_dataset(self.area, self.seed)
            space = build_space(ds, epsilon=self.epsilon, eta=self.eta, n_outputs=self.outputs, cost=self.cost,
                                seed=self.seed)
            log.info("building a %s mechanism over %d locations of %s (K=%d, eps=%g/km, eta=%g km)",
                     self.method, space.n_records, space.name, space.n_outputs, space.epsilon, space.eta)
            res = solve(space, self.method, progress=self.progress, **dict(self.options or {}))
            assert isinstance(res.mechanism, Mechanism)   # a method with a matrix (checked above)
            mech = res.mechanism
            if ds.labels is not None:
                mech = mech.with_metadata(labels=list(ds.labels))
            self.result_ = res
            points, labels = space.points, ds.labels
            cell = getattr(ds.travel, "cell", None) if ds.name.startswith("area:") else None
        self.mechanism_ = mech
        assert points is not None and mech.output_points is not None   # an area's, a network's or a file's
        self.locations_ = pd.DataFrame({"lat": points[:, 0], "lon": points[:, 1],
                                        "label": list(labels) if labels else [str(i) for i in range(len(points))]})
        out = mech.output_points
        self.outputs_ = pd.DataFrame({"lat": out[:, 0], "lon": out[:, 1]})
        self._tree = cKDTree(_unit_vectors(points))
        self.max_snap_km_ = self._snap_limit(points, cell)
        # secure draws by default; a seed gives one generator for the obfuscator's lifetime, so
        # that successive tables get fresh but reproducible draws
        self._generator = None if self.rng is None else as_generator(self.rng)
        return self

    def _snap_limit(self, points: np.ndarray, cell: float | None) -> float:
        if self.max_snap_km is not None:
            return V.positive_float("max_snap_km", self.max_snap_km)
        if cell is not None:      # cells over a box: the farthest a point of a cell is from its centre
            dlat = float(cell) / KM_PER_DEGREE
            lons = np.unique(points[:, 1])
            dlon = float(lons[1] - lons[0]) if len(lons) > 1 else dlat / float(np.cos(np.radians(points[0, 0])))
            corners = [points + np.array([sa * dlat / 2, so * dlon / 2]) for sa in (-1, 1) for so in (-1, 1)]
            return max(float(haversine_km(points, c).max()) for c in corners) * (1 + 1e-9)
        _, nn = self._tree.query(_unit_vectors(points), k=2)
        return float(haversine_km(points, points[nn[:, 1]]).max()) * (1 + 1e-9)

    def _check_fitted(self) -> None:
        if not hasattr(self, "mechanism_"):
            raise ValueError("this LocationObfuscator is not fitted yet: call fit() first")

    # ------------------------------------------------------------- snapping
    def _snap(self, X: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(points, record index, snapping distance in km) of every row; ValueError for a row
        outside the area."""
        self._check_fitted()
        pts = _frame_latlon(X, self.lat, self.lon, "X")
        if len(pts) == 0:
            return pts, np.empty(0, dtype=np.int64), np.empty(0)
        _, rec = self._tree.query(_unit_vectors(pts))
        rec = np.asarray(rec, dtype=np.int64)
        locs = self.locations_[["lat", "lon"]].to_numpy(dtype=np.float64)
        km = haversine_km(pts, locs[rec])
        far = km > self.max_snap_km_
        if np.any(far):
            i = int(np.argmax(far))
            raise ValueError(f"X: row {X.index[i]!r} at ({pts[i, 0]:.6g}, {pts[i, 1]:.6g}) is outside the area: "
                             f"{km[i]:.3g} km from its nearest location, more than max_snap_km = "
                             f"{self.max_snap_km_:.3g}")
        return pts, rec, km

    def snap(self, X: Any) -> pd.DataFrame:
        """For every row of ``X`` (same index): the record it is snapped to (``location``, the
        mechanism's record index, and ``label``, e.g. the road node id), that location's
        ``location_lat``/``location_lon``, and the snapping distance ``snap_km``. The guarantee
        is between these locations (see the module docstring)."""
        _, rec, km = self._snap(X)
        loc = self.locations_.iloc[rec]
        return pd.DataFrame({"location": rec, "label": loc["label"].to_numpy(),
                             "location_lat": loc["lat"].to_numpy(), "location_lon": loc["lon"].to_numpy(),
                             "snap_km": km}, index=X.index)

    # ------------------------------------------------------------ transform
    def transform(self, X: Any) -> Any:
        """A copy of ``X`` with every point replaced by an output location drawn from the
        mechanism for the location it snaps to: same index, same other columns (for a
        GeoDataFrame, new Point geometries). Raises ValueError for a point outside the area."""
        _, rec, km = self._snap(X)
        drawn = self.mechanism_.perturb(rec, rng=self._generator) if len(rec) else np.empty(0, dtype=np.int64)
        out = self.mechanism_.output_points
        assert out is not None   # checked when fitted
        new = out[drawn]
        if len(km):
            log.info("perturbed %d points (snapping distance: median %.3g km, largest %.3g km)",
                     len(km), float(np.median(km)), float(km.max()))
        out = X.copy()
        if _is_geoframe(X):
            geopandas = __import__("geopandas")
            out = out.set_geometry(geopandas.points_from_xy(new[:, 1], new[:, 0], crs=X.crs))
        else:
            out[self.lat] = new[:, 0]
            out[self.lon] = new[:, 1]
        return out

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> Any:
        """:meth:`fit` (which ignores ``X``), then :meth:`transform` of ``X``."""
        return self.fit(X, y).transform(X)

    def save(self, path: str | Path) -> Path:
        """Write the fitted mechanism (``.npz``, audited when loaded with ``mechanism=PATH``)."""
        self._check_fitted()
        return self.mechanism_.save(path)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.requires_fit = True
        return tags
