"""Paper 000: the PMO engines against monolithic HiGHS, the partition statistics of Tables 1-2,
and LP assembly."""
