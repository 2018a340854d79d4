"""LP plumbing with no privacy claims."""
