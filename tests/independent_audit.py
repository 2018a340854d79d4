"""An audit of a mechanism file written without certdp's code: numpy to read the file and
recompute the protected pairs, Python's decimal arithmetic (60 digits) to decide every
inequality ``x <= exp(eps d) y`` as ``ln x - ln y <= eps d``, so no float overflow, NaN or
rounding can pass a violation. With ``owner`` (the data owner's epsilon, eta, metric and
records, as plain arrays) the pairs and epsilon come from the owner instead of the file."""

from __future__ import annotations

import decimal

import numpy as np

R_KM = 6371.0088


def protected_pairs(f) -> list[tuple[int, int, float]]:
    """Every pair (i < j) within eta, from a file or from the owner's arrays."""
    eta = float(f["eta"])
    metric = str(f["metric"])
    if metric == "precomputed":
        D = f["distance_matrix"]
    elif metric == "euclidean":
        P = f["points"]
        D = np.sqrt(((P[:, None, :] - P[None, :, :]) ** 2).sum(axis=2))
    else:  # haversine, (lat, lon) degrees
        lat, lon = np.radians(f["points"][:, 0]), np.radians(f["points"][:, 1])
        h = (np.sin((lat[None, :] - lat[:, None]) / 2) ** 2
             + np.cos(lat[:, None]) * np.cos(lat[None, :]) * np.sin((lon[None, :] - lon[:, None]) / 2) ** 2)
        D = 2 * R_KM * np.arcsin(np.sqrt(np.clip(h, 0, 1)))
    n = D.shape[0]
    return [(i, j, float(D[i, j])) for i in range(n) for j in range(i + 1, n) if D[i, j] <= eta]


def independent_audit(path, owner: dict | None = None) -> tuple[bool, int]:
    """(passed, number of violated inequalities) for the mechanism file at ``path``; ``owner``:
    a dict with 'epsilon', 'eta', 'metric' and 'points' or 'distance_matrix'."""
    ctx = decimal.Context(prec=60, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
    with np.load(path, allow_pickle=False) as f:
        Z = np.asarray(f["matrix"], dtype=np.float64)
        eps = float(f["epsilon"] if owner is None else owner["epsilon"])
        pairs = protected_pairs(f if owner is None else owner)
    if Z.ndim != 2 or any(max(i, j) >= Z.shape[0] for i, j, _ in pairs):
        return False, -1
    if not (np.all(np.isfinite(Z)) and Z.min() >= 0 and Z.max() <= 1):
        return False, -1
    for row in Z:
        if abs(sum((decimal.Decimal(float(x)) for x in row), decimal.Decimal(0)) - 1) > decimal.Decimal("1e-9"):
            return False, -1
    D = decimal.Decimal
    bad = 0
    for i, j, d in pairs:
        ed = ctx.multiply(D(eps), D(d))
        for a, b in ((i, j), (j, i)):
            for k in range(Z.shape[1]):
                x, y = D(float(Z[a, k])), D(float(Z[b, k]))
                # x <= exp(ed) y, decided as ln x - ln y <= ed (no exp to overflow)
                if x > 0 and (y == 0 or ctx.subtract(ctx.ln(x), ctx.ln(y)) > ed):
                    bad += 1
    return bad == 0, bad

