"""The output decomposition's pricing LPs in their primal and in their LP-dual form, whole solves
on the same instances in the same run (``solve_pmo_outputs(pricing="primal" | "dual")``).

The primal form (``min w'z, A z <= 0, 0 <= z <= 1``; M = 2 x edges rows, N columns) was the
only one up to session 8; the dual form (N rows, M + N columns, only the right-hand side
changes) is the default since session 9. Both give rigorous bounds from the same formula, so
each run stops at the same gap; the table shows rounds, seconds in pricing and in total, the
certified gap and the ratios primal / dual.
"""

from __future__ import annotations

from _ab import compare, parse, write


def main() -> None:
    a = parse("pricing_forms")
    rows, raw = compare(a, "pricing", ("primal", "dual"),
                        lambda r: [r.timings["pricing"], r.timings["total"], r.gap, r.upper_bound],
                        lambda p, d: [p.timings["pricing"] / d.timings["pricing"], p.timings["total"] / d.timings["total"]])
    write(a, "Pricing LPs in primal and in dual form (decomposition over outputs)",
          ["instance", "pricing form", "status", "rounds", "pricing s", "total s", "final gap",
           "upper bound", "pricing primal/dual", "total primal/dual"],
          rows, raw, "the ratios are on the dual row")


if __name__ == "__main__":
    main()
