"""Synthesizers as view methods: they release synthetic records, and queries are answered by
counting them (paper 004's PrivBayes competitor).

* **PrivBayes** (Zhang et al., SIGMOD 2014 / TODS 2017) through DataSynthesizer (Ping, Stoyanovich
  and Howe 2017; the ``synth`` extra), its correlated attribute mode: a Bayesian network of
  ``degree`` parents per attribute chosen greedily by the exponential mechanism on mutual
  information (epsilon / 2), then its noisy conditional distributions (Laplace, epsilon / 2),
  from which ``n`` records are drawn. The whole release is charged once, epsilon, to the
  accountant. The columns are handed over as the tensor's cell indices with the public domains
  as their categories, so nothing about the domain is learnt from the data. Like
  DataSynthesizer's own analysis, it takes the number of records n as public (its noise scales
  use it), and its noise is numpy's, seeded, not OpenDP's: a competitor for comparisons, not a
  release path. DataSynthesizer also computes noisy one-way histograms in this mode; they are
  not used for the synthetic records and not released.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
import threading
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .. import _validate as V
from .._optional import require
from ..randomness import RNGLike, as_generator
from .budget import PrivacyBudget
from .tensor import CountTensor
from .view import SampleView


def _records(tensor: CountTensor, names: list[str]) -> pd.DataFrame:
    """One row per record: its cell's index on every axis."""
    rows = np.repeat(tensor.coords, tensor.counts.astype(np.int64), axis=0)
    return pd.DataFrame(rows, columns=names)


@contextlib.contextmanager
def _pool_of_threads():
    """DataSynthesizer scores candidate parents on a ``multiprocessing`` Pool, which on Linux
    forks the caller. A caller that has loaded jax (the ``mbi`` view methods) has threads, and a
    forked copy of a threaded process can deadlock (Python warns as much); a fork server or
    spawn instead re-imports the caller's main script in every worker, so a script that calls
    this without an ``if __name__ == "__main__"`` guard hangs (each worker fails, and the pool
    starts another). Inside this context its Pool is a pool of threads: no process at all. The
    result does not change (the pool only maps a pure function). On 2 cores, 5,000 records of
    4-value columns took 2.4 / 23.3 / 108 s at 6 / 10 / 14 columns against 10.4 / 30.5 / 94 s on
    a fork server's processes (their start-up costs more than the GIL below 14 columns)."""
    from multiprocessing.pool import ThreadPool

    import DataSynthesizer.lib.PrivBayes as pb

    plain = pb.Pool
    pb.Pool = ThreadPool
    try:
        yield
    finally:
        pb.Pool = plain


def privbayes(tensor: CountTensor, epsilon: float = 1.0, degree: int = 2, rng: RNGLike = None) -> SampleView:
    """PrivBayes by DataSynthesizer (see the module docstring); ``degree`` parents per attribute."""
    eps = V.positive_float("epsilon", epsilon)
    k = V.int_in_range("degree", degree, 1)
    require("DataSynthesizer", "synth", "the privbayes view method")

    if len(tensor.shape) < 2:
        raise ValueError("privbayes needs at least two columns (a Bayesian network over one has no edges)")
    seed = int(as_generator(rng).integers(2**31 - 1))
    names = [f"c{j}" for j in range(len(tensor.shape))]
    n = int(tensor.counts.sum())
    budget = PrivacyBudget(eps)
    budget.root.charge(eps, "privbayes: network (eps/2) and conditionals (eps/2), DataSynthesizer")
    try:
        synth = _synthesize(tensor, names, eps, k, n, seed)
    except MemoryError:
        raise
    except Exception as exc:    # DataSynthesizer's own failures (a one-row table divides by zero)
        raise ValueError(f"privbayes (DataSynthesizer) failed on this table: {type(exc).__name__}: {exc}"[:500]) from None
    cells, counts = np.unique(synth, axis=0, return_counts=True)
    return SampleView(tensor.domains, cells.reshape(-1, len(names)), counts.astype(np.int64), "privbayes", eps,
                      float(budget.spent()), {"degree": k, "records": n},
                      {"privbayes": eps})


#: DataSynthesizer seeds the process's global ``random`` and ``np.random``, and a build here
#: swaps process-wide objects (stdout, the warning filters, its module's Pool): two builds at
#: once from two threads interleaved their draws (the same seed gave other records) and could
#: leave stdout captured. Builds take this lock, one at a time.
_DATASYNTHESIZER = threading.Lock()


def _synthesize(tensor: CountTensor, names: list[str], eps: float, k: int, n: int, seed: int) -> np.ndarray:
    """DataSynthesizer's correlated attribute mode on the tensor's records: ``n`` synthetic
    records, as cell indices (one build at a time in the process: :data:`_DATASYNTHESIZER`)."""
    from DataSynthesizer.DataDescriber import DataDescriber
    from DataSynthesizer.DataGenerator import DataGenerator

    with _DATASYNTHESIZER, tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()), \
            warnings.catch_warnings(), _pool_of_threads():
        warnings.simplefilter("ignore", FutureWarning)        # DataSynthesizer's pandas idioms, not ours
        warnings.simplefilter("ignore", DeprecationWarning)
        d = Path(tmp)
        _records(tensor, names).to_csv(d / "records.csv", index=False)
        (d / "domains.json").write_text(json.dumps({c: list(range(s)) for c, s in zip(names, tensor.shape)}))
        desc = DataDescriber(category_threshold=max(tensor.shape) + 1)
        desc.describe_dataset_in_correlated_attribute_mode(
            str(d / "records.csv"), k=min(k, len(names) - 1), epsilon=eps,
            attribute_to_datatype={c: "Integer" for c in names},
            attribute_to_is_categorical={c: True for c in names},
            categorical_attribute_domain_file=str(d / "domains.json"), seed=seed)
        desc.save_dataset_description_to_file(str(d / "description.json"))
        gen = DataGenerator()
        gen.generate_dataset_in_correlated_attribute_mode(n, str(d / "description.json"), seed=seed)
        return gen.synthetic_dataset[names].to_numpy(dtype=np.int64)
