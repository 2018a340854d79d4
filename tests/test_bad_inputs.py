"""Every bad input of tests/bad_inputs.py: a clear one-line error with the right exit status,
no traceback, nothing written."""

from __future__ import annotations

import pytest

from .bad_inputs import CASES, judge, make_files, run_case


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    make_files(d)
    return d


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c.slow else c for c in CASES],
                         ids=[" ".join(c.args)[:60] for c in CASES])
def test_bad_input_is_a_clear_error(folder, case):
    code, output, created = run_case(case, folder)
    assert judge(case, code, output, created) == "ok", output
