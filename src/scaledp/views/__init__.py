"""Private views of count tensors (paper 004, RIPOST). Work in progress: only the budget
accountant (:mod:`.budget`) and the noise primitives (:mod:`.noise`) exist so far."""

from .budget import BudgetExceeded, BudgetNode, PrivacyBudget
from .noise import exponential_choice, laplace, laplace_release

__all__ = ["BudgetExceeded", "BudgetNode", "PrivacyBudget", "exponential_choice", "laplace", "laplace_release"]
