"""certdp's benchmarks, grouped by paper: ``paper000`` (PMO engines against monolithic HiGHS,
partition statistics, LP assembly), ``paper002`` (Figure 1, Tables 2-3), ``paper003`` (LR-Geo
tables and figures), ``paper004`` (RIPOST on Adult). Run one from the project root with
``bash run.sh bench paper000.decompositions [options]`` (or ``python -m benchmarks.paper000.decompositions``).
Each writes its tables into the ``results/`` folder beside it (see ``_common``); the
``Command:`` line of a result file records how it was produced, with the script path of its time.
"""
