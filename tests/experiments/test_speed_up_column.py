"""The speed-up column of the decompositions benchmark does not depend on the order of methods."""

from benchmarks.paper000.decompositions import speed_ups


def _rows(order):
    by = {"outputs": ["g", 1, 1, "outputs", "optimal", 13, 4.0, 0.009, None, None],
          "simplex": ["g", 1, 1, "simplex", "no mechanism", None, None, None, None, None],
          "ipm": ["g", 1, 1, "ipm", "optimal", 40, 180.0, 1e-7, None, None],
          "loose": ["g", 1, 1, "benders", "time_limit", 9, 30.0, 0.05, None, None]}
    return [list(by[m]) for m in order]


def test_speed_up_filled_when_monolithic_runs_last():
    for order in (["outputs", "simplex", "ipm", "loose"], ["ipm", "simplex", "loose", "outputs"]):
        rows = _rows(order)
        speed_ups(rows, 0.01)
        got = {r[3]: r[8] for r in rows}
        assert got["outputs"] == 45.0          # 180 s over 4 s; the failed simplex is ignored
        assert got["ipm"] is None and got["simplex"] is None
        assert got["benders"] is None          # outside the requested gap
