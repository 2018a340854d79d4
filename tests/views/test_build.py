"""The one entry for a view: unknown parameters are refused."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from certdp.randomness import CounterRNG
from certdp.views.build import build_view

from .tensors import random_tensor


def test_build_view_refuses_unknown_parameter():
    t = random_tensor(np.random.default_rng(0))
    with pytest.raises(ValueError, match="does not take"):
        build_view(t, "ripost", 0.1, 1, alhpa=0.3)
    with pytest.raises(ValueError, match="method"):
        build_view(t, "nosuch", 0.1, 1)


@pytest.mark.parametrize("method", ["ripost", "privtree", "hdpview", "identity"])
def test_a_build_reports_its_steps_where_its_method_does(method, monkeypatch):
    """The decompositions (build.REPORTS_PROGRESS) tell a progress callback how far they are;
    the others take the callback and build as without it. hdpview and ripost report at most
    every 2 s, so the clock is made to run fast."""
    import itertools
    import time

    from certdp.views.build import REPORTS_PROGRESS

    clock = itertools.count(0.0, 5.0)
    monkeypatch.setattr(time, "perf_counter", lambda: next(clock))
    t = random_tensor(np.random.default_rng(0))
    events = []
    v = build_view(t, method, 1.0, 1, progress=events.append)
    w = build_view(t, method, 1.0, 1)
    work = v.workload(["x0=0..2", "x1=1 x2=0..3", "x2=2"])
    assert np.array_equal(v.estimates(work), w.estimates(work))      # the same view, seeded alike
    assert bool(events) == (method in REPORTS_PROGRESS)
    assert all(e.message for e in events)


@pytest.mark.parametrize("method", ["mst", "aim", "privbayes"])
def test_a_model_fit_over_too_many_columns_is_refused_before_its_charge(method):
    """MST, AIM and PrivBayes grow as a power of the columns (build.MAX_COLUMNS, measured): one
    column more than the limit is refused by the request's check, before a session charges."""
    import pandas as pd

    from certdp.views import Domain
    from certdp.views.build import MAX_COLUMNS
    from certdp.views.session import Session

    d = MAX_COLUMNS[method] + 1
    frame = pd.DataFrame({f"c{i}": [0, 1, 1] for i in range(d)})
    doms = {f"c{i}": Domain.categorical(f"c{i}", [0, 1]) for i in range(d)}
    session = Session(frame, 10.0)
    with pytest.raises(ValueError, match=f"above its limit of {MAX_COLUMNS[method]}"):
        session.build_view(method, 1.0, columns=list(doms), domains=doms)
    assert session.spent == 0


_NOT_CALLABLE = st.one_of(st.integers(), st.text(max_size=3), st.floats(), st.lists(st.integers(), max_size=2))
_NOT_A_SEED = st.one_of(st.text(max_size=3), st.floats(), st.booleans(), st.lists(st.integers(), max_size=2),
                        st.builds(CounterRNG, st.integers(0, 10)))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(progress=st.one_of(st.none(), _NOT_CALLABLE), rng=st.one_of(st.none(), _NOT_A_SEED),
       method=st.sampled_from(["identity", "privtree"]))
def test_call_arguments_a_build_cannot_use_are_refused_before_the_charge(progress, rng, method):
    """progress and rng are checked with the request: a Session refuses them before charging (a
    build failed on them only when it first reported or drew noise, after the charge), and
    build_view refuses them too."""
    from certdp.views.session import Session

    assume(progress is not None or rng is not None)
    t = random_tensor(np.random.default_rng(0))
    session = Session(t, 10.0)
    with pytest.raises(TypeError, match="progress must be a callable|rng must be|CounterRNG"):
        session.build_view(method, 1.0, progress=progress, rng=rng)
    with pytest.raises(TypeError, match="progress must be a callable|rng must be|CounterRNG"):
        build_view(t, method, 1.0, rng, progress=progress)
    assert session.spent == 0


@pytest.mark.parametrize("method", ["ripost", "identity"])
def test_answers_to_no_boxes_are_floats(method):
    from certdp.views.view import Workload

    t = random_tensor(np.random.default_rng(0))
    v = build_view(t, method, 1.0, 1)
    empty = Workload(np.zeros((0, 3), dtype=np.int64), np.zeros((0, 3), dtype=np.int64), np.zeros(0, dtype=np.int64), 2)
    assert v.estimates(empty).dtype == np.float64 and np.array_equal(v.estimates(empty), [0.0, 0.0])
