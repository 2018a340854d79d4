"""Property-based checks (hypothesis) on generated inputs: the Python entry and the command
line either succeed with an exactly private result or fail with a clear error, never a
traceback, never a partial file."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certdp import SolverLimitError, build_space, solve
from certdp.cli import main
from certdp.datasets import grid

from .independent_audit import independent_audit

numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**6),
                    st.sampled_from([0, -1, 1e-300, 1e300, float("nan"), float("inf")]))
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)


@given(eps=numbers, eta=numbers)
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_solve_is_private_or_refuses(eps, eta):
    try:
        space = build_space(grid(3, 3), epsilon=eps, eta=eta, n_outputs=4, seed=0)
        res = solve(space, "lp")
    except (ValueError, TypeError, SolverLimitError) as exc:
        assert str(exc)
        return
    m = res.mechanism
    assert m.verification.passed and np.all(m.matrix >= 0)
    if len(m.edges):
        # no entry faces a zero across a protected pair (a positive-against-zero is never private)
        a, b = m.edges[:, 0], m.edges[:, 1]
        assert not np.any((m.matrix[a] > 0) & (m.matrix[b] == 0)) and not np.any((m.matrix[b] > 0) & (m.matrix[a] == 0))


@given(eps=numbers, eta=numbers)
@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_saved_solutions_pass_an_independent_exact_audit(tmp_path, eps, eta):
    out = tmp_path / f"m{abs(hash((eps, eta)))}.npz"
    res = CliRunner().invoke(main, ["solve", "--dataset", "grid:3x3", "--epsilon", str(eps), "--eta", str(eta),
                                    "--outputs", "4", "--seed", "0", "--quiet", "--out", str(out)])
    assert "Traceback" not in res.output
    if res.exit_code == 0:
        assert independent_audit(out)[0]
    else:
        assert res.exit_code in (1, 2) and res.output.startswith("Error:") and not out.exists()


option_names = st.sampled_from(["--epsilon", "--eta", "--cell", "--outputs", "--gap", "--tolerance", "--time-limit",
                                "--subsets", "--r", "--delta", "--draws", "--seed", "--workers", "--max-iterations",
                                "--lambdas", "--solver", "--method", "--partition", "--objective", "--out"])


@given(opts=st.lists(st.tuples(option_names, st.one_of(texts, numbers.map(str))), max_size=4))
@settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_solve_on_the_command_line_never_shows_a_traceback(tmp_path, opts):
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        before = set(os.listdir("."))
        args = ["solve", "--dataset", "grid:3x3", "--epsilon", "1", "--eta", "1.5", "--quiet", "--time-limit", "20"]
        for name, value in opts:
            args += [name, value]
        res = CliRunner().invoke(main, args)
        created = set(os.listdir(".")) - before
    finally:
        os.chdir(cwd)
    assert "Traceback" not in res.output, res.output
    assert res.exit_code in (0, 1, 2), res.output
    if res.exit_code != 0:
        assert res.output.strip().splitlines()[-1].startswith("Error:") and not created


@given(content=st.binary(max_size=300))
@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_audit_and_perturb_of_random_bytes_are_clear_errors(tmp_path, content):
    p = tmp_path / "x.npz"
    p.write_bytes(content)
    for args in (["audit", str(p)], ["perturb", str(p)]):
        res = CliRunner().invoke(main, args, input="0\n")
        assert res.exit_code == 2 and "Traceback" not in res.output and res.output.startswith("Error:")


@pytest.fixture(scope="module")
def mech_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("m") / "m.npz"
    solve(build_space(grid(3, 3), epsilon=1.0, eta=1.5, seed=1)).mechanism.save(p)
    return p


@given(text=st.text(max_size=40))
@settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_perturb_reads_any_text_or_says_which_line_is_wrong(mech_file, text):
    res = CliRunner().invoke(main, ["perturb", str(mech_file), "--seed", "1"], input=text)
    # no exception escaped (the error may quote the text, which can itself say "Traceback")
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert "Traceback (most recent call last)" not in res.output
    if res.exit_code == 0:
        lines = res.stdout.strip().splitlines()
        assert lines[0] == "record,output" and all(0 <= int(x.split(",")[1]) < 9 for x in lines[1:])
    else:
        assert res.exit_code == 2 and res.output.startswith("Error:")


def test_json_outputs_are_json_even_when_the_result_warns(tmp_path):
    res = CliRunner().invoke(main, ["solve", "--dataset", "grid:3x3", "--epsilon", "1000", "--eta", "1.5", "--json"])
    s = json.loads(res.stdout)
    assert s["audit_passed"] and s["seed"] >= 0 and "no protection" in s["message"]
    assert math.isfinite(s["expected_loss"])
