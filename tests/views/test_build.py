"""The one entry for a view: unknown parameters are refused."""

from __future__ import annotations

import numpy as np
import pytest

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
