"""The generated ``city`` scaling instance: a city-sized road network, no shared data needed."""

from __future__ import annotations

import pytest

from certdp.experiments.instances import scaling


@pytest.mark.parametrize("n, lo, hi", [(1000, 18, 24), (2000, 37, 46)])
def test_city_with_eta_fixed_has_the_neighbours_of_a_city_at_2_km(n, lo, hi):
    space = scaling("city", n, "eta")
    i, _ = space.neighbor_pairs
    assert space.n_records == n and space.n_outputs == 100 and space.eta == 2.0
    assert lo <= 2 * len(i) / n <= hi
    # the loss is the travel distance on the streets to 100 sampled destinations
    assert space.cost.shape == (n, 100) and (space.cost >= 0).all()


def test_city_with_density_held_keeps_about_twelve_neighbours():
    for n in (500, 2000):
        space = scaling("city", n, "density")
        i, _ = space.neighbor_pairs
        assert 10 <= 2 * len(i) / n <= 14


def test_an_unknown_kind_is_named_in_the_error():
    with pytest.raises(KeyError, match="city"):
        scaling("lake", 500, "eta")
