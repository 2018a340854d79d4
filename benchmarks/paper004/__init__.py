"""Paper 004: RIPOST and its competitors on Adult (Figures 3, 5, 7, 15, error decomposition,
build time)."""
