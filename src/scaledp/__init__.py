"""scaledp: privacy mechanisms that are optimal and still scale."""

from .audit import expected_loss, quantile_loss, verify, worst_case_loss
from .datasets import build_space, parse_dataset
from .graph import MDPGraph
from .mechanisms import Mechanism, SolveResult, certify, exponential_mechanism, solve_pmo
from .space import Space

__version__ = "0.1.0"

__all__ = [
    "MDPGraph", "Mechanism", "SolveResult", "Space", "build_space", "certify", "expected_loss",
    "exponential_mechanism", "parse_dataset", "quantile_loss", "solve_pmo", "verify",
    "worst_case_loss",
]
