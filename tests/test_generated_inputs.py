"""Generated inputs (tests/generators.py) for the mechanism commands: CLI arguments, road and
embedding files, mutated mechanism files. Every run succeeds with an independently verified
result or fails with one ``Error:`` line (the audit: with its own exit status), never a
traceback, never a partial file. A fixed sample runs by default; thousands with -m slow."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .generators import FAMILIES, GOOD, base_bytes, outcome_class


@pytest.fixture(scope="module")
def bases():
    with tempfile.TemporaryDirectory() as t:
        yield base_bytes(Path(t))


def _settings(n: int):
    return settings(max_examples=n, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


FAST = {"CLI arguments (solve, compare, audit, perturb)": 12, "road-network CSV files": 8,
        "embedding files (.npy + words, word2vec .bin)": 8, "mechanism files (valid files mutated)": 80}
SLOW = {"CLI arguments (solve, compare, audit, perturb)": 1500, "road-network CSV files": 600,
        "embedding files (.npy + words, word2vec .bin)": 600, "mechanism files (valid files mutated)": 3000}


def _check(family: str, bases, data) -> None:
    case = data.draw(FAMILIES[family](bases))
    verdict = outcome_class(case)
    assert verdict in GOOD, f"{verdict}\n{case}"


@pytest.mark.parametrize("family", list(FAST))
def test_a_fixed_sample_of_generated_inputs(bases, family):
    given(st.data())(_settings(FAST[family])(lambda data: _check(family, bases, data)))()


@pytest.mark.slow
@pytest.mark.parametrize("family", list(SLOW))
def test_thousands_of_generated_inputs(bases, family):
    given(st.data())(_settings(SLOW[family])(lambda data: _check(family, bases, data)))()
