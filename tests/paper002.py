"""Independent computations for paper 002's tests: its setting, and its LPs written out with
every constraint and solved by scipy (not by certdp's code)."""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import linprog

from certdp import Space
from certdp.datasets import build_space, gaussian
from certdp.family.constopt import nearest_outputs


def metric_space(n: int, dim: int = 2, eps: float = 2.0, seed: int = 0) -> Space:
    """Paper 002's setting: outputs = records, loss = distance, every pair protected."""
    return build_space(gaussian(n, dim, seed=seed), epsilon=eps, eta=math.inf)


def naive_mdp_rows(u: int, n: int, K: int, nv: int, eps: float, D: np.ndarray, A: list, b: list) -> None:
    """Append every mDP row of record u (Eq. 2, all v != u, all outputs w) to A, b."""
    for v in range(n):
        if v == u:
            continue
        for w in range(K):
            row = np.zeros(nv)
            row[u * K + w] = 1.0
            row[v * K + w] = -math.exp(eps * D[u, v])
            A.append(row)
            b.append(0.0)


def naive_optmech(space: Space) -> float:
    """The worst-case LP written out with every constraint, solved by scipy's linprog."""
    n, K = space.n_records, space.n_outputs
    D = space.distance_rows()
    nv = n * K + 1
    A, b = [], []
    for u in range(n):
        naive_mdp_rows(u, n, K, nv, space.epsilon, D, A, b)
        row = np.zeros(nv)
        row[u * K:(u + 1) * K] = space.cost[u]
        row[-1] = -1.0
        A.append(row)
        b.append(0.0)
    Aeq = np.zeros((n, nv))
    for u in range(n):
        Aeq[u, u * K:(u + 1) * K] = 1.0
    c = np.zeros(nv)
    c[-1] = 1.0
    res = linprog(c, A_ub=np.array(A), b_ub=b, A_eq=Aeq, b_eq=np.ones(n), bounds=(0, None), method="highs")
    assert res.status == 0
    return float(res.fun)


def naive_constopt_value(space: Space, r: int, lam: float, free: np.ndarray | None = None) -> float:
    """The LP of Algorithm 1 written with every mDP constraint (2) and every equality (4);
    ``free`` (an (n, K) boolean mask, ``free[u, w]`` when u is in I(w)) replaces I_NN,r."""
    n, K = space.n_records, space.n_outputs
    eps = space.epsilon / 2
    D = space.distance_rows()
    if free is None:
        F = nearest_outputs(D, r)
        free = np.zeros((n, K), bool)
        free[np.repeat(np.arange(n), r), F.reshape(-1)] = True
    nv = n * K + K + 1      # M, Y, k
    A, b, Aeq, beq = [], [], [], []
    for u in range(n):
        naive_mdp_rows(u, n, K, nv, eps, D, A, b)
        for w in range(K):
            if not free[u, w]:
                row = np.zeros(nv)
                row[u * K + w] = 1.0
                row[n * K + w] = -math.exp(-eps * D[u, w])
                Aeq.append(row)
                beq.append(0.0)
        row = np.zeros(nv)
        row[u * K:(u + 1) * K] = -1.0
        A.append(row)
        b.append(-1.0)
        row = np.zeros(nv)
        row[u * K:(u + 1) * K] = space.cost[u] + lam
        row[-1] = -1.0
        A.append(row)
        b.append(lam)
    c = np.zeros(nv)
    c[-1] = 1.0
    res = linprog(c, A_ub=np.array(A), b_ub=b, A_eq=np.array(Aeq) if Aeq else None, b_eq=beq if Aeq else None,
                  bounds=(0, None), method="highs")
    assert res.status == 0
    return float(res.fun)


def brute_tight(Mu, Mv, delta):
    if Mu[Mv == 0].sum() > delta:
        return math.inf
    lo, hi = 0.0, 1e6
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if np.maximum(Mu - mid * Mv, 0).sum() <= delta else (mid, hi)
    return hi
