"""Paper 002: Figure 1 (L_0.95 against epsilon_tight), Table 2 (time and LP size), Table 3
(ConstOPTMech ablation)."""
