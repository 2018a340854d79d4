"""Paper 000: the perturbation-matrix optimisation (PMO) problem and its engines.

``model`` holds the LP (Eq. 2-7) below every engine; ``bounds`` the rigorous lower bounds from
its duals; ``upper`` the cheap repairs that turn approximate matrices into feasible ones; the
engines are ``monolithic`` (HiGHS per component), ``benders`` (the paper's decomposition over a
partition from ``partition``) and ``outputs`` (certdp's decomposition over outputs). Use them
through :func:`certdp.solve`.
"""
