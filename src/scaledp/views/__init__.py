"""Private views of count tensors (paper 004): RIPOST and its competitors.

Pipeline: table -> :class:`CountTensor` (declared domains, sparse) -> a decomposition
(:func:`ripost`, :func:`privtree`, :func:`hdpview`; or :func:`identity`) -> a view
(:class:`BlockView`) -> range count queries (:class:`Workload`). Every release is charged to a
:class:`PrivacyBudget` that cannot be overspent; noise comes from OpenDP's samplers unless a
seed is given for an experiment.
"""

from .budget import BudgetExceeded, BudgetNode, PrivacyBudget
from .build import METHODS, build_view
from .competitors import hdpview, identity, privtree
from .ripost import DepthSeries, ripost
from .sampling import BACKEND, add_laplace, exponential_choice, laplace_release, laplace_release_many
from .tensor import CountTensor, DataDerivedDomainWarning, Domain, read_table
from .view import BlockView, DenseView, Workload, rmse, true_answers

__all__ = ["BACKEND", "BlockView", "BudgetExceeded", "BudgetNode", "CountTensor", "DataDerivedDomainWarning",
           "DenseView", "DepthSeries", "Domain", "METHODS", "PrivacyBudget", "Workload", "build_view",
           "add_laplace", "exponential_choice", "hdpview", "identity", "laplace_release",
           "laplace_release_many", "privtree", "read_table", "ripost", "rmse", "true_answers"]
