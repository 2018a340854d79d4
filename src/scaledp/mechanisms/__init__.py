"""Everything that returns a :class:`Mechanism`."""

from .base import Mechanism, UnverifiedMechanismError
from .certify import CertificationError, CertifyReport, certify
from .exponential import exponential_matrix, exponential_mechanism
from .optimal import SolverLimitError, assemble_pmo, solve_pmo
from .result import SolveResult

__all__ = [
    "CertificationError", "CertifyReport", "Mechanism", "SolveResult", "SolverLimitError",
    "UnverifiedMechanismError", "assemble_pmo", "certify", "exponential_matrix",
    "exponential_mechanism", "solve_pmo",
]
