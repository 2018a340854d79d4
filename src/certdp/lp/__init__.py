"""LP plumbing with no privacy claims: ``highs`` (the only module that imports highspy),
``dense`` (an interior-point method for dense masters), ``bounds`` (rigorous Lagrangian bounds),
``benders`` (one generic Benders engine) with its ``executors``, and ``outcome`` (the gap and
the solver-limit error every engine reports)."""
