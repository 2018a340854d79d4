"""Private views of count tensors (paper 004, RIPOST). Work in progress: only count tensors
(:mod:`.tensor`), the budget accountant (:mod:`.budget`) and the noise primitives
(:mod:`.noise`) exist so far; RIPOST itself is not built yet."""

from .budget import BudgetExceeded, BudgetNode, PrivacyBudget
from .noise import exponential_choice, laplace, laplace_release
from .tensor import CountTensor, DataDerivedDomainWarning, Domain

__all__ = ["BudgetExceeded", "BudgetNode", "CountTensor", "DataDerivedDomainWarning", "Domain", "PrivacyBudget",
           "exponential_choice", "laplace", "laplace_release"]
