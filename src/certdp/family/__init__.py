"""Paper 002's mechanisms and its comparison set, named as in the literature: the exponential
mechanism, ConstOPTMech, SpannerMech, and the additive-noise mechanisms Madlib and planar
Laplace. OPTMech is the PMO LP with the worst-case objective (:mod:`certdp.pmo.monolithic`).
Use them through :func:`certdp.solve`."""
