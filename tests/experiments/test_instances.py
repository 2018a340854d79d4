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


# ----------------------------------------------------------------- the growing-density family
from certdp.experiments.instances import NEIGHBOUR_SHARE, growing, growing_box, load  # noqa: E402


@pytest.mark.parametrize("n, box", [(500, 0), (1000, 1)])
def test_the_generated_city_grows_its_neighbours_with_the_records(n, box):
    """(N - 1) / 48 neighbours a record at eta = 2 km, in every box (the city's boxes are cities
    of different seeds), K = 100 outputs, epsilon x the median neighbour distance = 1."""
    import numpy as np

    space = growing("city", n, box)
    i, d = space.neighbor_pairs
    assert space.n_records == n and space.n_outputs == 100 and space.eta == 2.0
    assert 0.85 <= (2 * len(i) / n) / (NEIGHBOUR_SHARE * (n - 1)) <= 1.15
    assert space.epsilon * float(np.median(d)) == pytest.approx(1.0)
    if n == 500:                                                             # the registry's name for it
        assert load(f"city-{n}-b{box}").cost.tolist() == space.cost.tolist()


def test_the_box_follows_its_rule_on_any_cloud_of_nodes():
    """On random clouds: the box holds at least n nodes, and either eta is 2 km and the box is
    the smallest with at most the target share of pairs within 2 km (unless it must be bigger
    to hold n), or the whole cloud is denser than that and eta is where the share is met."""
    import numpy as np
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from certdp.experiments.instances import GROWING_ETA, _pair_share

    @settings(max_examples=25)
    @given(st.integers(0, 10_000), st.floats(2.0, 80.0), st.integers(20, 200))
    def check(seed, side, n):
        rng = np.random.default_rng(seed)
        xy = rng.uniform(0, side, (300, 2)) * rng.uniform(0.3, 1.0, (1, 2))
        inside, eta = growing_box(xy, n, 0)
        assert inside.size >= n
        if eta < GROWING_ETA:                     # the whole cloud, at the share's distance
            assert inside.size == len(xy)
            assert _pair_share(xy, eta) == pytest.approx(NEIGHBOUR_SHARE, abs=2 / len(xy) ** 2 + 1e-3)
        else:
            assert eta == GROWING_ETA
            assert inside.size == n or _pair_share(xy[inside], eta) <= NEIGHBOUR_SHARE + 1e-12

    check()


@pytest.mark.parametrize("network", ["helsinki", "goldcoast", "sydney"])
def test_real_networks_have_the_family_s_neighbours(network):
    from ..conftest import shared_file

    shared_file("roads" if network != "helsinki" else "helsinki")
    space = growing(network, 1000, 1)
    i, _ = space.neighbor_pairs
    assert 0.85 <= (2 * len(i) / 1000) / (NEIGHBOUR_SHARE * 999) <= 1.15
    assert space.eta == (2.0 if network == "sydney" else pytest.approx(space.eta)) and space.eta <= 2.0
    with pytest.raises(ValueError, match="fewer than n"):
        growing(network, 30_000, 0)


def test_held_out_networks_are_found_only_where_the_folder_says(tmp_path, monkeypatch):
    import shutil

    from certdp.experiments import instances as inst
    from ..conftest import shared_file

    nodes = shared_file("helsinki", "helsinki_walking_nodes.csv")
    edges = nodes.with_name("helsinki_walking_edges.csv")
    monkeypatch.delenv("CERTDP_HELDOUT", raising=False)
    assert inst.heldout_networks() == []
    (tmp_path / "roads").mkdir()
    shutil.copy(nodes, tmp_path / "roads" / "town_nodes.csv")
    shutil.copy(edges, tmp_path / "roads" / "town_edges.csv")
    shutil.copy(nodes, tmp_path / "roads" / "orphan_nodes.csv")   # no edges file: not a network
    monkeypatch.setenv("CERTDP_HELDOUT", str(tmp_path))
    assert inst.heldout_networks() == ["town"]
    space = load("town-500-b0")
    assert space.n_records == 500
