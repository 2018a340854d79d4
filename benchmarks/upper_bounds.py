"""The output decomposition's upper-bound candidate from the free master: the exact cover
(``upper="exact"``, up to session 9) against the elastic free master whose few off rows are
re-solved by an LP in those rows alone (``upper="repair"``, the default since session 10;
:func:`scaledp.mechanisms.certify.repair_rows`). Whole solves on the same instances in the same
run. The lower bound does not depend on the choice (the same rounds give the same bounds), so
the table shows when each reaches the gap: rounds, seconds and the ratio exact / repair.
"""

from __future__ import annotations

from _ab import compare, parse, write


def main() -> None:
    a = parse("upper_bounds")
    rows, raw = compare(a, "upper", ("exact", "repair"),
                        lambda r: [r.timings["free_master"], r.timings["certify"], r.timings["total"], r.gap,
                                   r.upper_bound, "{repaired_best}/{repaired_tried}/{repaired_failed}".format(**r.stats)],
                        lambda e, p: [e.timings["total"] / p.timings["total"]])
    write(a, "Upper bound from the exact free master against the repaired elastic one "
          "(decomposition over outputs)",
          ["instance", "upper", "status", "rounds", "free master s", "certify + repair s", "total s",
           "final gap", "upper bound", "repair best/tried/failed", "total exact/repair"],
          rows, raw, "the ratio is on the repair row")


if __name__ == "__main__":
    main()
