"""The UCI Adult table with public domains (for examples, tests and the paper-004 benchmarks).

The categorical value sets are the ones published in ``adult.names``; the numeric ranges are
declared here from the census coding (not read from the records): ages 17-90, one bin per
year; education-num 1-16; hours-per-week 1-99, one bin per hour; capital gain 0-100,000 and
capital loss 0-5,000 and fnlwgt 0-1.5 million in 100 equal bins. Missing values (``?``) fall in
the explicit ``<overflow>`` bin of their column when the tensor is built with
``overflow='bin'``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .tensor import Domain

COLUMNS = ("age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
           "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country",
           "income")

NUMERIC = {"age": (17, 91, 74), "fnlwgt": (0, 1_500_000, 100), "education-num": (1, 17, 16),
           "capital-gain": (0, 100_000, 100), "capital-loss": (0, 5_000, 100), "hours-per-week": (1, 100, 99)}


def read_names(path: str | Path) -> dict[str, list[str]]:
    """Categorical value sets from ``adult.names`` (lines ``column: v1, v2, ... .``)."""
    out: dict[str, list[str]] = {}
    for line in Path(path).read_text().splitlines():
        if line.startswith("|") or ":" not in line:
            continue
        col, rest = line.split(":", 1)
        col, rest = col.strip(), rest.strip().rstrip(".")
        if col in COLUMNS and rest != "continuous":
            out[col] = [v.strip() for v in rest.split(",")]
    out["income"] = ["<=50K", ">50K"]
    return out


def domains(names_path: str | Path) -> dict[str, Domain]:
    """Public domains of all fifteen columns."""
    doms = {c: Domain.numeric(c, lo, hi, b) for c, (lo, hi, b) in NUMERIC.items()}
    for c, vals in read_names(names_path).items():
        doms[c] = Domain.categorical(c, vals)
    missing = [c for c in COLUMNS if c not in doms]
    if missing:
        raise ValueError(f"{names_path} does not describe columns {missing}")
    return doms


def read(data_path: str | Path) -> pd.DataFrame:
    """``adult.data`` or ``adult.test`` as a DataFrame (``?`` becomes missing; the test file's
    comment line and the trailing dots of its labels are handled)."""
    p = Path(data_path)
    df = pd.read_csv(p, header=None, names=list(COLUMNS), skipinitialspace=True, na_values="?", comment="|")
    df["income"] = df["income"].astype(str).str.rstrip(".")
    return df
