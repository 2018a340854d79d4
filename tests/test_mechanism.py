"""The common suite every mechanism must pass, parametrised over mechanisms and instances
(as scipy runs one linprog suite against every backend)."""

from __future__ import annotations

import numpy as np
import pytest

from certdp import Mechanism, solve
from certdp.family.constopt import weighted_exponential_mechanism
from certdp.mechanism import UnverifiedMechanismError

from .conftest import small_spaces
from .mechanism_checks import check_exact_mdp, check_probabilities, check_sampling, check_save_load

SPACES = small_spaces()

MECHANISMS = {
    "lp-simplex": lambda s: solve(s, solver="simplex"),
    "lp-ipm": lambda s: solve(s, solver="ipm"),
    "lp-noreduce": lambda s: solve(s, reduce=False),
    "benders-metis": lambda s: solve(s, method="benders", partition="metis", subsets=3, gap=1e-3),
    "outputs": lambda s: solve(s, method="outputs", gap=1e-3),
    "expmech": lambda s: solve(s, "expmech"),
    "optmech": lambda s: solve(s, "optmech"),
    "constopt-r3": lambda s: solve(s, "constopt", r=3),
    "weighted-expmech": lambda s: weighted_exponential_mechanism(s, np.linspace(1.0, 3.0, s.n_outputs)),
    "spanner-d2": lambda s: solve(s, "spanner", delta=2.0),
}

CASES = [(m, s) for m in MECHANISMS for s in SPACES]
_cache: dict[tuple[str, str], object] = {}


def result(mech: str, space: str):
    key = (mech, space)
    if key not in _cache:
        _cache[key] = MECHANISMS[mech](SPACES[space])
    return _cache[key]


@pytest.mark.parametrize("mech,space", CASES)
class TestCommonSuite:
    def test_rows_sum_to_one_and_entries_are_probabilities(self, mech, space):
        Z = result(mech, space).mechanism.matrix
        assert Z.shape == (SPACES[space].n_records, SPACES[space].n_outputs)
        check_probabilities(Z)

    def test_exact_mdp_on_every_neighbouring_pair(self, mech, space):
        sp = SPACES[space]
        m = result(mech, space).mechanism
        edges, dist = sp.neighbor_pairs
        # the mechanism covers all pairs within eta, not only those kept by the reduction
        assert len(m.edges) == len(edges)
        check_exact_mdp(m.matrix, sp.epsilon, edges, dist)

    def test_save_load_round_trip(self, mech, space, tmp_path):
        check_save_load(result(mech, space).mechanism, tmp_path)

    def test_sampling_frequencies_match_the_matrix(self, mech, space):
        check_sampling(result(mech, space).mechanism)


@pytest.mark.parametrize("space", list(SPACES))
def test_lp_beats_or_matches_expmech_and_has_a_tight_certified_gap(space):
    lp = result("lp-simplex", space)
    em = result("expmech", space)
    assert lp.lower_bound is not None and lp.lower_bound <= lp.upper_bound
    assert lp.gap < 1e-6
    assert lp.upper_bound <= em.upper_bound + 1e-9


@pytest.mark.parametrize("space", list(SPACES))
def test_benders_is_within_its_reported_gap_of_the_optimum(space):
    opt = result("lp-simplex", space).upper_bound
    b = result("benders-metis", space)
    assert b.lower_bound <= opt * (1 + 1e-7) + 1e-12
    assert b.upper_bound >= opt * (1 - 1e-7) - 1e-12
    assert b.gap <= 1e-3 + 1e-9 and b.upper_bound <= opt * (1 + 1e-3) + 1e-9


@pytest.mark.parametrize("space", list(SPACES))
def test_solvers_and_reduction_agree_on_the_optimum(space):
    a = result("lp-simplex", space).upper_bound
    b = result("lp-ipm", space).upper_bound
    c = result("lp-noreduce", space).upper_bound
    assert b == pytest.approx(a, rel=1e-6, abs=1e-9)
    assert c == pytest.approx(a, rel=1e-6, abs=1e-9)


def test_mechanism_refuses_an_unverified_matrix():
    with pytest.raises(UnverifiedMechanismError):
        Mechanism(np.array([[1e-9, 1 - 1e-9], [0.0, 1.0]]), 1.0, np.array([[0, 1]]), np.array([1.0]))
