"""The tuning of the decomposition over outputs, in one frozen object passed into the engine.

Every value the engine uses that is not derived from the instance lives here, with its rule or
the measurement that set it. ``solve(space, "outputs", config=OutputsConfig(...))`` changes
them for one run; the defaults are the engine's. The sensitivity of each value (halved and
doubled on three networks at two sizes, time to a 1% certified gap) is measured by
``benchmarks/paper000/sensitivity.py``; docs/pmo.md has the table.

Measured so far (``results/sensitivity_500.md``: Helsinki, Gold Coast and Sydney at 500
records, each value halved and doubled): only ``box`` moves the rounds on road networks (9-24
rounds against the defaults' 11-16, in opposite directions on different networks: no other
value suits all three), and ``upper_every`` doubled saves 4-15% of the CPU seconds in the same
rounds (fewer upper steps); ``master_tolerance``, ``columns``, ``free_columns``,
``elastic_width``, ``block_rows`` and ``working_set_batch`` stay within a round and the
defaults' spread there. They are kept: road data at 500 records is one size of one kind, and
``master_tolerance``, ``columns`` and ``elastic_width`` were set on grid and Gaussian data,
where they moved the rounds. The sizes are already rules of the instance (units of N).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields


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
        exact_tolerance: the dense interior-point method's tolerance for an exact master (the
            free master, and the stabilised master once nothing prices out at looser ones).
        box: the stabilisation box's half-width for record i is ``box`` x the range of its
            costs (at least ``box_floor`` x the largest range: records with nearly flat costs
            must still move).
        box_floor: see ``box``.
        columns: the stabilised master keeps at most this x N columns (columns idle at its
            weights for two rounds running are deleted above it).
        free_columns: the free master keeps at most this x N columns.
        upper_every: an upper step (the free master and its repairs) every this many rounds.
        upper_near: near the target gap, an upper step may run as soon as this many rounds
            after the last one (rounds, not seconds: a run takes the same path on any machine).
        elastic_width: the elastic free master's slack costs ``lambda +- width``, width this x
            the stabilisation box's half-width.
        rebalance_slack: the stabilised master's own matrix is tried as an upper bound once its
            total slack is below this x N.
        fill_when: the free master's cover *leans on* its all-ones columns when they cover the
            rows this much on average (the priced points do not combine into an exact cover).
        fill_after: the filled free master is solved once the free master's cover has leaned on
            its all-ones columns at this many upper steps in a row.
        fill_near: ... and only while the best constant mechanism costs at most this share
            more than the lower bound.
        fill_iterations: a filled-master solve past this x N simplex iterations gives it up.
        productive_share: a pricing pass is productive when it brings at least this share of K
            new columns; only a productive first pass is followed by a second one.
        second_pass_work: a second pricing pass is cheap when one simplex iteration of a pass,
            counted as this x N master flops, times the pass's iterations, is below the last
            stabilised master's dense work.
        block_rows: components of at least this many records get a dense master solve of their
            own; smaller ones are packed into solves of at most this many rows.
        split_gain: the master is split by component only where that cuts the dense work
            (rows^2 per solve) by at least this share.
        screen_share: columns no dual in the box can use are left out of a solve once they are
            at least this share of the columns.
        working_set_batch: at most this x N violated cone rows join a pricing model's working
            set per solve.
        working_set_from: cones with at most this many rows per record start with every row in
            the working set.
    """

    master_tolerance: float = 1e-2
    gap_share: float = 0.1
    exact_tolerance: float = 1e-8
    box: float = 0.07
    box_floor: float = 0.1
    columns: float = 1.75
    free_columns: float = 4.0
    upper_every: int = 5
    upper_near: int = 3
    elastic_width: float = 1000.0
    rebalance_slack: float = 0.1
    fill_when: float = 0.5
    fill_after: int = 3
    fill_near: float = 0.25
    fill_iterations: float = 10.0
    productive_share: float = 0.5
    second_pass_work: float = 5000.0
    block_rows: int = 50
    split_gain: float = 0.2
    screen_share: float = 0.1
    working_set_batch: float = 0.25
    working_set_from: float = 10.0

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            whole = f.type == "int"
            if isinstance(v, bool) or not isinstance(v, int if whole else (int, float)):
                raise TypeError(f"OutputsConfig.{f.name} must be {'an integer' if whole else 'a number'}, got {v!r}")
            if math.isnan(v) or v < 0:
                raise ValueError(f"OutputsConfig.{f.name} must be non-negative, got {v!r}")
        if not 0 < self.exact_tolerance <= self.master_tolerance < 1:
            raise ValueError("OutputsConfig needs 0 < exact_tolerance <= master_tolerance < 1")
        if self.upper_every < 1 or self.upper_near < 1 or self.block_rows < 1:
            raise ValueError("OutputsConfig.upper_every, upper_near and block_rows must be at least 1")
