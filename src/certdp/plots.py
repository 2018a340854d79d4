"""PNG plots for solver runs: Benders convergence and partition maps (matplotlib, no screen)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ._io import atomic_target
from ._optional import require


def _plt():
    matplotlib = require("matplotlib", "plot", "plotting")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str | Path) -> Path:
    plt = _plt()
    fig.tight_layout()
    p = Path(path)
    try:
        with atomic_target(p, ".png") as tmp:
            fig.savefig(tmp, dpi=120, format="png")
    finally:
        plt.close(fig)
    return p


def convergence_plot(history: Sequence[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Lower and upper bounds against iterations."""
    plt = _plt()
    it = [h["iteration"] for h in history]
    lb = [h["lower_bound"] for h in history]
    ub = [h["upper_bound"] if np.isfinite(h["upper_bound"]) else np.nan for h in history]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(it, lb, label="lower bound (master)")
    ax.plot(it, ub, label="upper bound (best feasible)")
    ax.set_xlabel("iteration")
    ax.set_ylabel("expected loss")
    ax.set_title(title or "Benders convergence")
    ax.legend()
    return _save(fig, path)


def partition_map(points: np.ndarray, labels: np.ndarray, boundary: np.ndarray, path: str | Path,
                  title: str = "", latlon: bool = False) -> Path:
    """Records coloured by subset; boundary records outlined."""
    plt = _plt()
    x, y = (points[:, 1], points[:, 0]) if latlon else (points[:, 0], points[:, 1])
    fig, ax = plt.subplots(figsize=(6, 5))
    ax.scatter(x, y, c=labels, cmap="tab20", s=18)
    b = np.asarray(boundary, dtype=bool)
    ax.scatter(x[b], y[b], facecolors="none", edgecolors="k", s=40, linewidths=0.8, label="boundary records")
    ax.set_title(title or "partition")
    ax.set_xlabel("lon" if latlon else "x")
    ax.set_ylabel("lat" if latlon else "y")
    ax.legend(loc="best", fontsize=8)
    ax.set_aspect("equal" if not latlon else "auto")
    return _save(fig, path)


def mechanism_picture(points: np.ndarray, output_points: np.ndarray, matrix: np.ndarray, record: int,
                      loss_mech: np.ndarray, loss_base: np.ndarray, path: str | Path, *,
                      names: tuple[str, str] = ("optimal", "ExpMech"), unit: str = "km", title: str = "") -> Path:
    """Two panels: on the map, where the mechanism sends ``record`` (each output's probability
    as the size and colour of its dot, the record starred); and every record's expected loss
    under the mechanism against the baseline, sorted, so that the gap between the two curves is
    what the mechanism saves."""
    plt = _plt()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.6))
    p = np.asarray(matrix[record], dtype=np.float64)
    ax.scatter(points[:, 0], points[:, 1], s=8, c="0.85", label="records")
    big = p > 1e-4
    sc = ax.scatter(output_points[big, 0], output_points[big, 1], s=20 + 600 * p[big] / p.max(), c=p[big],
                    cmap="viridis", alpha=0.85, label="outputs (size, colour: probability)")
    ax.scatter([points[record, 0]], [points[record, 1]], marker="*", s=260, c="crimson", edgecolors="k",
               label=f"record {record}")
    fig.colorbar(sc, ax=ax, label=f"Pr[output | record {record}]")
    ax.set_title(f"{names[0]}: where record {record} is reported")
    ax.set_xlabel(f"x ({unit})")
    ax.set_ylabel(f"y ({unit})")
    ax.set_aspect("equal")
    ax.legend(loc="upper right", fontsize=7)
    order = np.argsort(loss_base)
    bx.plot(np.arange(len(order)), loss_base[order], label=f"{names[1]} (mean {loss_base.mean():.3g})")
    bx.plot(np.arange(len(order)), loss_mech[order], label=f"{names[0]} (mean {loss_mech.mean():.3g})")
    bx.set_xlabel(f"records, by {names[1]}'s loss")
    bx.set_ylabel(f"expected loss of the record ({unit})")
    bx.set_title("expected loss per record, same epsilon")
    bx.legend()
    if title:
        fig.suptitle(title)
    return _save(fig, path)
