"""Paper 003: LR-Geo Tables 1-2, Figure 9 (scaling), Figures 11-13 (violations, inference)."""
