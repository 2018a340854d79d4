"""Count tensors over declared domains (paper 004, section 3)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certdp.views.tensor import OVERFLOW, CountTensor, DataDerivedDomainWarning, Domain


FRAME = pd.DataFrame({"age": [17, 25, 25, 90, 40, 33], "sex": ["M", "F", "F", "M", "F", "M"],
                      "hours": [10.0, 40.0, 40.0, 99.0, 45.5, 1.0]})
DOMS = {"age": Domain.numeric("age", 17, 90, 73), "sex": Domain.categorical("sex", ["F", "M"])}


def test_counts_match_the_rows():
    t = CountTensor.from_frame(FRAME, ["age", "sex"], DOMS)
    assert t.shape == (73, 2) and t.total == len(FRAME)
    dense = np.zeros(t.shape, dtype=int)
    dense[tuple(t.coords.T)] = t.counts
    assert dense[8, 0] == 2                      # age 25 -> bin 8, sex F
    assert dense[72, 1] == 1                     # age 90 is the top edge: last bin
    assert dense.sum() == len(FRAME)


def test_data_derived_domains_are_refused_unless_accepted():
    with pytest.raises(ValueError, match="hours"):
        CountTensor.from_frame(FRAME, ["age", "hours"], {"age": DOMS["age"]})
    with pytest.warns(DataDerivedDomainWarning, match="hours"):
        t = CountTensor.from_frame(FRAME, ["age", "hours"], {"age": DOMS["age"]}, accept_data_leak=True)
    assert t.total == len(FRAME) and t.shape[1] == 100


def test_out_of_domain_values_are_refused_or_binned_never_dropped():
    doms = {"sex": Domain.categorical("sex", ["F"])}
    with pytest.raises(ValueError, match="3 rows"):
        CountTensor.from_frame(FRAME, ["sex"], doms)
    t = CountTensor.from_frame(FRAME, ["sex"], doms, overflow="bin")
    assert t.total == len(FRAME)
    assert t.domains[0].labels()[-1] == OVERFLOW
    assert dict(zip(t.coords[:, 0].tolist(), t.counts.tolist())) == {0: 3, 1: 3}


@given(st.lists(st.sampled_from(["F", "M", "X", None]), min_size=1, max_size=12), st.sampled_from(["X", None, "Z"]))
@settings(max_examples=60, derandomize=True)
def test_overflow_bin_domains_do_not_depend_on_the_records(values, extra):
    """Neighbouring tables (one row more, outside the declared domain) release the same domains:
    with overflow='bin' every column has its bin whether or not a row lands in it."""
    doms = {"sex": Domain.categorical("sex", ["F", "M"])}
    a = CountTensor.from_frame(pd.DataFrame({"sex": values}), ["sex"], doms, overflow="bin")
    b = CountTensor.from_frame(pd.DataFrame({"sex": values + [extra]}), ["sex"], doms, overflow="bin")
    assert a.domains == b.domains
    assert a.domains[0].labels()[-1] == OVERFLOW


@pytest.mark.parametrize("call,match", [
    (lambda: CountTensor.from_frame(FRAME, ["nope"], {}), "not in the table"),
    (lambda: CountTensor.from_frame(FRAME.iloc[:0], ["sex"], DOMS), "empty"),
    (lambda: CountTensor.from_frame(FRAME, [], DOMS), "at least one"),
    (lambda: Domain.numeric("age", 5, 5), "range"),
    (lambda: Domain.numeric("age", 0, 1, 101), "bins"),
    (lambda: Domain.categorical("sex", []), "empty"),
    (lambda: CountTensor.from_frame(FRAME, ["sex"], DOMS, overflow="drop"), "overflow"),
])
def test_bad_input(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_adult_fifteen_columns_is_sparse(adult):
    df, _ = adult
    numeric = {"age": (17, 91), "fnlwgt": (0, 1_500_000), "education-num": (1, 17), "capital-gain": (0, 100_000),
               "capital-loss": (0, 5_000), "hours-per-week": (1, 100)}
    doms = {c: Domain.numeric(c, lo, hi) for c, (lo, hi) in numeric.items()}
    with pytest.warns(DataDerivedDomainWarning):
        t = CountTensor.from_frame(df, list(df.columns), doms, accept_data_leak=True, overflow="bin")
    assert t.total == len(df)
    assert t.domain_size > 10 ** 18
    assert len(t.counts) <= len(df)
    assert math.prod(t.shape) == t.domain_size


def test_a_numeric_overflow_bin_is_queried_by_its_label():
    d = Domain.numeric("age", 0, 100, 10)
    with pytest.raises(ValueError, match="no <overflow> bin"):
        d.code_range(OVERFLOW)
    t = CountTensor.from_frame(pd.DataFrame({"age": [5, 150, 200]}), ["age"], {"age": d}, overflow="bin")
    dom = t.domains[0]
    assert dom.code_range(OVERFLOW) == [(10, 11)] and dom.code_range("0..100") == [(0, 10)]
