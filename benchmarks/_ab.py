"""Whole solves of the output decomposition with two values of one option, on the same
instances in the same run (the A/B runs of ``pricing_forms.py``, ``upper_bounds.py`` and
``rebalance_envelope.py``)."""

from __future__ import annotations

import argparse
from typing import Any, Callable, Sequence

from scaledp.mechanisms.pmo_outputs import solve_pmo_outputs
from scaledp.mechanisms.result import SolveResult

import instances
from _common import write_table


def parse(name: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", default=name, help="results/NAME.md and .json")
    ap.add_argument("--instances", nargs="+", default=["grid-500", "road-500", "gauss-500", "text-500"])
    ap.add_argument("--gap", type=float, default=1e-2)
    ap.add_argument("--cap", type=float, default=600.0, help="time limit per solve, seconds")
    return ap.parse_args()


def compare(a: argparse.Namespace, option: str, values: Sequence[str],
            cells: Callable[[SolveResult], list[Any]],
            ratios: Callable[[SolveResult, SolveResult], list[float]]) -> tuple[list[list[Any]], list[dict]]:
    """Rows ``[instance, value, status, rounds, *cells(result), *ratios]``, the ratios (first
    value against the second) on each instance's last row and "-" elsewhere; and the raw
    records for the JSON file."""
    rows: list[list[Any]] = []
    raw: list[dict] = []
    for name, sp in instances.available(a.instances):
        res = []
        for v in values:
            r = solve_pmo_outputs(sp, gap=a.gap, time_limit=a.cap, **{option: v})
            res.append(r)
            rows.append([name, v, r.status, r.iterations, *cells(r)])
            raw.append({"instance": name, option: v, "status": r.status, "iterations": r.iterations,
                        "gap": r.gap, "upper_bound": r.upper_bound, "lower_bound": r.lower_bound,
                        "timings": r.timings, "stats": r.stats})
            print(f"{name} {v}: {r.status}, {r.iterations} rounds, total {r.timings['total']:.1f} s, "
                  f"gap {r.gap:.4f}", flush=True)
        q = ratios(res[0], res[-1])
        for row in rows[-len(values):]:
            row.extend(["-"] * len(q))
        rows[-1][-len(q):] = q
    return rows, raw


def write(a: argparse.Namespace, title: str, columns: Sequence[str], rows: list[list[Any]], raw: list[dict],
          ratio_note: str) -> None:
    """``write_table`` with the notes every A/B table carries (``ratio_note``: which row holds
    the ratios)."""
    write_table(a.name, title, columns, rows,
                notes=[f"stop at gap {a.gap}, cap {a.cap:g} s per solve; 2 pricing threads (one per core); "
                       + ratio_note, "instances: benchmarks/instances.py"], raw=raw)
