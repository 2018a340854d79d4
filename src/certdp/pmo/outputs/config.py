"""The tuning of the decomposition over outputs, in one frozen object passed into the engine.

Every value the engine uses that is not derived from the instance lives here, with its rule or
the measurement that set it. ``solve(space, "outputs", config=OutputsConfig(...))`` changes
them for one run; the defaults are the engine's. The sensitivity of each value (halved and
doubled on three networks at two sizes, time to a 1% certified gap) is measured by
``benchmarks/paper000/sensitivity.py``; docs/pmo.md has the tables.

Only values that matter live in :class:`OutputsConfig`. A value is *fixed* (a named constant
below, no longer a tuning) where halving and doubling it left the CPU seconds to a 1% gap
within 10% of the defaults' spread wherever its mechanism acts: on Helsinki, Gold Coast and
Sydney at 500 and at 1,000 records (``results/sensitivity_500.md``,
``results/sensitivity_500_rest.md``, ``results/sensitivity_1000.md``,
``results/sensitivity_1000_roads.md``, ``results/sensitivity_1000_roads_rest.md``,
``results/sensitivity_1000_helsinki_rest.md``; the split by component, ``BLOCK_ROWS`` and
``SPLIT_GAIN``, acts on Helsinki, whose mDP graph has several components below 2,000
records), and on word vectors, where the screening (``SCREEN_SHARE``) and the filled master
act (``results/sensitivity_text.md``; the filled master's gate and give-up, ``FILL_NEAR`` and
``FILL_ITERATIONS``, moved no run there nor on any road network). The fields that remain
moved a run: ``box``, ``upper_every`` and ``working_set_from`` on the road networks at 500
records, ``gap_share`` (x0.5: 33 rounds against 29) and ``working_set_batch`` (x2: 12% more
CPU seconds) on Helsinki at 1,000, ``fill_when`` and ``productive_share`` on word vectors
(x2: 64 rounds against 22, and 23% fewer CPU seconds), ``fill_after`` the rounds there (29
against 22), ``elastic_width`` the rounds on the road networks at 2,000 records (x10: 26-43
rounds against 23-53, ``results/growing_2000_elastic1000.md``) and at 1,000 (x2: Sydney 24
rounds against 21; x0.5: Helsinki 15% more CPU seconds), ``master_tolerance`` (x0.5: Sydney
24 rounds against 21 at 1,000) and ``columns`` (x2: 22% and 34% more CPU seconds on Gold
Coast and Sydney at 1,000), both also set on grid and Gaussian data, where they moved the
rounds; ``working_set_age`` (x0.5: 5-12% more CPU seconds on Helsinki, Gold Coast and Sydney
at 1,000, ``results/sensitivity_1000_age.md``; x2 within the spread).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

#: The dense interior-point method's tolerance for an exact master (the free master, and the
#: stabilised master once nothing prices out at looser ones): a solver accuracy, not a tuning.
EXACT_TOLERANCE = 1e-8
#: The box half-width of a record is at least this share of the largest cost range x ``box``
#: (records with nearly flat costs must still move).
BOX_FLOOR = 0.1
#: The free master keeps at most this x N columns.
FREE_COLUMNS = 4.0
#: Near the target gap, an upper step may run as soon as this many rounds after the last one.
UPPER_NEAR = 3
#: The stabilised master's own matrix is tried as an upper bound once its total slack is below
#: this x N.
REBALANCE_SLACK = 0.1
#: A second pricing pass is cheap when one simplex iteration of a pass, counted as this x N
#: master flops, times the pass's iterations, is below the last stabilised master's dense work.
SECOND_PASS_WORK = 5000.0
#: Components of at least this many records get a dense master solve of their own; smaller
#: ones are packed into solves of at most this many rows (the default of
#: :class:`~certdp.pmo.outputs.master.ColumnMaster`'s ``block_rows``).
BLOCK_ROWS = 50
#: The master is split by component only where that cuts the dense work (rows^2 per solve) by
#: at least this share.
SPLIT_GAIN = 0.2
#: Columns no dual in the box can use are left out of a solve once they are at least this share
#: of the columns.
SCREEN_SHARE = 0.1
#: A failed repair of the elastic free master multiplies its width by this for the rest of the
#: run: one order of magnitude fewer rows off 1 (the generated city at 2,000 records: 203-435
#: rows off at width 30, the repair failing from the second step on; 80-141 at width 100, every
#: repair succeeding; none at 1,000).
ELASTIC_HARDEN = 10.0
#: The filled free master is tried only while the best constant mechanism costs at most this
#: share more than the lower bound (its gate).
FILL_NEAR = 0.25
#: A filled-master solve past this x N simplex iterations is given up for the rest of the run.
FILL_ITERATIONS = 10.0
#: A repair that would re-solve more than this share of the records is not local (word vectors,
#: text-500 at width 100: 443 of 500 records, a 40,000-row LP and 23 s, where the free master
#: takes 0.3 s): it is given up before its LP.
REPAIR_SHARE = 0.5


@dataclass(frozen=True)
class OutputsConfig:
    """The outputs decomposition's tuning (module docstring). Sizes are in units of N, the
    number of records, so that they scale with the instance.

    Attributes:
        master_tolerance: the stabilised master is solved to a relative accuracy of
            ``gap_share`` x the current gap, at most this (primal-dual column generation,
            Gondzio, Gonzalez-Brevis and Munari 2013): well-centred duals price better
            columns, and a solve takes 5-12 interior-point steps instead of 16-23. Neither
            bound depends on it.
        gap_share: see ``master_tolerance``.
        box: the stabilisation box's half-width for record i is ``box`` x the range of its
            costs (at least ``BOX_FLOOR`` x the largest range: records with nearly flat costs
            must still move).
        columns: the stabilised master keeps at most this x N columns (columns idle at its
            weights for two rounds running are deleted above it).
        upper_every: an upper step (the free master and its repairs) every this many rounds.
            10: against 5, 4-15% fewer CPU seconds on the road networks at 500 records, 12% and
            29% fewer on the city and Gold Coast at 2,000 (``results/sensitivity_2000.md``), and
            within the defaults' spread on word vectors, grid and Gaussian data at 500
            (``results/sensitivity_text_upper.md``, ``results/sensitivity_kinds_upper.md``);
            at 5,000 Sydney records, 5 took 22% more CPU seconds over the same 51 rounds and
            ended at a 3.04% gap against 2.93% (``results/growing_5000_upper5.md``).
        elastic_width: the elastic free master's slack costs ``lambda +- width``, width this x
            the stabilisation box's half-width, until a repair fails (then ``ELASTIC_HARDEN``
            times as much, for the rest of the run). A softer elastic master leaves more rows
            off 1 for the repair to re-solve exactly, which lowers the certified cost, as long
            as the repair succeeds. 100: against 1,000, box 0 of the road networks at 2,000
            records took 23 rounds against 33 (the city), 34 against 43 (Sydney), 53 against 57
            (Helsinki) and 27 against 26 (Gold Coast) (``results/growing_2000.md``,
            ``results/growing_2000_elastic1000.md``); at 500 records every kind stays within
            the defaults' spread (``results/sensitivity_elastic.md``).
        fill_when: the free master's cover *leans on* its all-ones columns when they cover the
            rows this much on average (the priced points do not combine into an exact cover).
        fill_after: the filled free master is solved once the free master's cover has leaned on
            its all-ones columns at this many upper steps in a row.
        productive_share: a pricing pass is productive when it brings at least this share of K
            new columns; only a productive first pass is followed by a second one.
        working_set_batch: at most this x N violated cone rows join a pricing model's working
            set per solve.
        working_set_from: cones with at most this many rows per record start with every row in
            the working set.
        working_set_age: a cone row leaves a pricing model's working set after this many solves
            in a row at which it was strictly slack (:mod:`.pricing`); 0 keeps every row that
            joined.
    """

    master_tolerance: float = 1e-2
    gap_share: float = 0.1
    box: float = 0.07
    columns: float = 1.75
    upper_every: int = 10
    elastic_width: float = 100.0
    fill_when: float = 0.5
    fill_after: int = 3
    productive_share: float = 0.5
    working_set_batch: float = 0.25
    working_set_from: float = 10.0
    working_set_age: int = 5

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            whole = f.type == "int"
            if isinstance(v, bool) or not isinstance(v, int if whole else (int, float)):
                raise TypeError(f"OutputsConfig.{f.name} must be {'an integer' if whole else 'a number'}, got {v!r}")
            if math.isnan(v) or v < 0:
                raise ValueError(f"OutputsConfig.{f.name} must be non-negative, got {v!r}")
        if not EXACT_TOLERANCE <= self.master_tolerance < 1:
            raise ValueError(f"OutputsConfig.master_tolerance must be in [{EXACT_TOLERANCE}, 1)")
        if self.upper_every < 1:
            raise ValueError("OutputsConfig.upper_every must be at least 1")
