"""The output decomposition's second upper-bound candidate, the stabilised master's matrix:
rebalanced with the uniform mechanism once its slack is below 0.01 N (``rebalance="plain"``,
up to session 10) against first lowered to its mDP envelope
(:func:`scaledp.mechanisms.certify.mdp_envelope`) and tried once the slack is below 0.1 N
(``rebalance="envelope"``, the default since session 11). Whole solves on the same instances in
the same run; the lower bound does not depend on the choice, so the table shows when each
reaches the gap: rounds, seconds and the ratio plain / envelope.
"""

from __future__ import annotations

from _ab import compare, parse, write


def main() -> None:
    a = parse("rebalance_envelope")
    rows, raw = compare(a, "rebalance", ("plain", "envelope"),
                        lambda r: [r.timings["certify"], r.timings["total"], r.gap, r.upper_bound,
                                   "{rebalanced_best}/{rebalanced_tried}".format(**r.stats)],
                        lambda p, e: [p.timings["total"] / e.timings["total"]])
    write(a, "Upper bound from the stabilised master's matrix: rebalanced, or lowered to its "
          "mDP envelope first (decomposition over outputs)",
          ["instance", "rebalance", "status", "rounds", "certify + rebalance s", "total s", "final gap",
           "upper bound", "rebalanced best/tried", "total plain/envelope"],
          rows, raw, "the ratio is on the envelope row")


if __name__ == "__main__":
    main()
