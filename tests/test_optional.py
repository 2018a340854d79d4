"""Optional dependencies: a missing extra is a clear error that names it."""

from __future__ import annotations

import importlib

import pytest
from click.testing import CliRunner

import certdp._optional as opt
from certdp.cli import main
from certdp.lp.executors import make_runner


@pytest.fixture
def without(monkeypatch):
    """Make the named top-level packages fail to import."""
    real = importlib.import_module

    def block(*names):
        def fake(name, *a, **kw):
            if name.split(".")[0] in names:
                raise ImportError(f"No module named {name!r}")
            return real(name, *a, **kw)
        monkeypatch.setattr(opt.importlib, "import_module", fake)
    return block


def test_the_dask_executor_names_the_distributed_extra(without):
    without("dask")
    with pytest.raises(opt.MissingExtraError, match=r"pip install 'certdp\[distributed\]'"):
        make_runner([], executor="dask", workers=1)


def test_plots_name_the_plot_extra_on_the_command_line(without, tmp_path):
    without("matplotlib")
    res = CliRunner().invoke(main, ["solve", "--dataset", "grid:3x4", "--epsilon", "1", "--eta", "1.5",
                                    "--method", "outputs", "--plot", str(tmp_path)])
    assert res.exit_code == 1 and "certdp[plot]" in res.output
    assert "Traceback" not in res.output


def test_a_parquet_table_without_an_engine_names_the_parquet_extra(without, tmp_path):
    without("pyarrow", "fastparquet")
    t = tmp_path / "t.parquet"
    t.write_bytes(b"PAR1 not read: the engine is missing")
    res = CliRunner().invoke(main, ["view", "build", str(t), "--columns", "a", "--out", str(tmp_path / "v.json")])
    assert res.exit_code == 1 and "certdp[parquet]" in res.output and "Traceback" not in res.output
    assert res.output.count("\n") == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]


def test_importing_certdp_leaves_the_heavy_libraries_to_the_code_that_needs_them():
    """``import certdp`` (every CLI call, every worker process) does not import scikit-learn
    (k-means partitions only) or pandas (CSV readers, views): together they cost about 0.9 s."""
    import subprocess
    import sys

    code = "import sys, certdp; print(sorted({'sklearn', 'pandas', 'matplotlib'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
