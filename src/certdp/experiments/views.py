"""The comparison paper 004's figures report: RMSE of several view methods on one random
range-query workload, and the evaluation-only helpers that read the true data (Figure 3)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import _validate as V
from ..progress import Progress, report
from ..randomness import RNGLike, as_generator
from ..views.blocks import aggregation_error
from ..views.build import DENSE_LIMITS, METHODS, WORKLOAD_PARAM, build_view
from ..views.tensor import CountTensor
from ..views.view import BlockView, Workload, rmse, true_answers


def leaf_truth(view: BlockView, tensor: CountTensor) -> tuple[np.ndarray, np.ndarray]:
    """True sum and true AE of every leaf of ``view``. Reads the true data: for evaluation
    (error decomposition, Figure 3), never part of a release."""
    sums, aes = np.zeros(view.n_blocks), np.zeros(view.n_blocks)
    for i, (lo, hi) in enumerate(zip(view.lo, view.hi)):
        x = tensor.counts[np.all((tensor.coords >= lo) & (tensor.coords < hi), axis=1)].astype(np.float64)
        sums[i] = x.sum()
        aes[i] = aggregation_error(x, float(np.prod((hi - lo).astype(np.float64))))
    return sums, aes


def share_converged_with_error(view: BlockView, tensor: CountTensor) -> float:
    """Share of the view's leaves whose true AE is > 0 (paper 004, Figure 3)."""
    return leaf_kinds(view, tensor)["ae_positive"]


def leaf_kinds(view: BlockView, tensor: CountTensor) -> dict[str, float]:
    """What the view's leaves are, as shares of all leaves (evaluation only: reads the true data).

    Every leaf is exactly one of: ``single_cell`` (one cell: AE is 0 by definition, and the
    decomposition stopped because the block cannot be cut, not because a test converged),
    ``empty`` (several cells, all zero), ``uniform`` (several cells, equal non-zero counts) or
    ``ae_positive``. ``ae_positive_of_tested`` is the AE > 0 share among the leaves of more than
    one cell, the ones a convergence test stopped: the reading of paper 004's Figure 3 that
    counts only sub-domains that converged."""
    keys = ("ae_positive", "single_cell", "empty", "uniform", "ae_positive_of_tested")
    if view.n_blocks == 0:
        return dict.fromkeys(keys, 0.0)
    sums, aes = leaf_truth(view, tensor)
    single = np.prod((view.hi - view.lo).astype(np.float64), axis=1) == 1
    positive = aes > 1e-9
    tested = ~single
    return {"ae_positive": float(positive.mean()), "single_cell": float(single.mean()),
            "empty": float(np.mean(tested & (sums == 0))), "uniform": float(np.mean(tested & (sums > 0) & ~positive)),
            "ae_positive_of_tested": float(positive[tested].mean()) if tested.any() else 0.0}


@dataclass
class CompareRow:
    """One method's row in a view comparison: RMSE over the workload, timings and view size."""
    method: str
    rmse_mean: float
    rmse_std: float
    blocks_mean: float
    seconds_mean: float
    spent_max: float
    relative: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The row as a JSON-ready dictionary."""
        return dict(self.__dict__)


def compare_views(tensor: CountTensor, methods: Sequence[str], epsilon: float = 0.1, queries: int = 3000,
                  query_columns: int = 2, reps: int = 10, rng: RNGLike = None,
                  params: dict[str, dict[str, Any]] | None = None, progress: Progress | None = None,
                  on_view: Callable[[str, Any, Workload, np.ndarray], None] | None = None
                  ) -> tuple[list[CompareRow], Workload, dict[str, str]]:
    """Each method ``reps`` times on one random workload; RMSE mean and standard deviation, and
    R-RMSE against ``ripost`` when it is among the methods (else against the first).

    A method that materialises the domain (Identity, HDMM, DAWA) is skipped, and named in the
    returned ``skipped``, when the domain is above its limit and other methods remain; asked for
    alone, it raises its own error. Workload-aware methods (HDMM, AIM) are told how many columns
    the queries restrict unless ``params`` says otherwise. ``progress`` hears of every view
    built (``done`` out of ``total`` in its record, with the method and the RMSE);
    ``on_view(method, view, workload, true answers)`` is called with every view built, for
    measures beyond the RMSE on the same builds."""
    names = list(methods)
    if not names:
        raise ValueError("methods must name at least one method")
    for m in names:
        V.choice("methods", m, tuple(METHODS))
    qcols = min(query_columns, len(tensor.shape))
    params = {m: dict(p) for m, p in (params or {}).items()}
    for m, key in WORKLOAD_PARAM.items():
        params.setdefault(m, {}).setdefault(key, qcols)
    skipped: dict[str, str] = {}
    for m, default in DENSE_LIMITS.items():
        limit = params.get(m, {}).get("max_cells", default)
        if m in names and len(names) > 1 and tensor.domain_size > limit:
            names.remove(m)
            skipped[m] = f"{tensor.cells_text} cells, above its limit of {limit:,}"
    reps = V.int_in_range("reps", reps, 1)
    g = as_generator(rng)
    work = Workload.random(tensor.shape, queries, qcols, g)
    truth = true_answers(tensor, work)
    rows: list[CompareRow] = []
    total = len(names) * reps
    for m in names:
        errs, blocks, secs, spent = [], [], [], []
        for rep in range(reps):
            t0 = time.perf_counter()
            v = build_view(tensor, m, epsilon, g, **params.get(m, {}))
            secs.append(time.perf_counter() - t0)
            errs.append(rmse(v.estimates(work), truth))
            if on_view is not None:
                on_view(m, v, work, truth)
            done = len(rows) * reps + rep + 1
            report(progress, "build", f"{m} repetition {rep + 1}/{reps}: RMSE {errs[-1]:.4g}, {secs[-1]:.2f} s",
                   {"done": done, "total": total, "method": m, "rmse": errs[-1]})
            blocks.append(v.n_blocks)
            spent.append(v.spent)
        rows.append(CompareRow(m, float(np.mean(errs)), float(np.std(errs)), float(np.mean(blocks)),
                               float(np.mean(secs)), float(max(spent))))
    ref = next((r for r in rows if r.method == "ripost"), rows[0])
    for r in rows:
        r.relative = r.rmse_mean / ref.rmse_mean if ref.rmse_mean > 0 else None
    return rows, work, skipped
