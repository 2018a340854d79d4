"""Private views of count tensors (paper 004): RIPOST and its competitors.

Pipeline: table -> :class:`CountTensor` (declared domains, sparse) -> :func:`build_view` with a
method (decompositions ``ripost``, ``privtree``, ``hdpview``; dense ``identity``, ``hdmm``,
``dawa``; model-based ``mst``, ``aim``; the synthesizer ``privbayes``) -> a view (blocks, cells,
marginals or synthetic records; :func:`load_view` reads any saved one) -> range count queries
(:class:`Workload`), answered as a DataFrame of estimates and noise deviations. Every release is
charged to a :class:`PrivacyBudget` that cannot be overspent; noise comes from OpenDP's samplers
unless a seed is given for an experiment. Releases about one table are kept within a total by a
:class:`Session`, in memory or in a persistent ledger file (:mod:`.ledger`).
"""

from .budget import BudgetExceeded, BudgetNode, PrivacyBudget
from .build import METHODS, build_view
from .ledger import Ledger, LedgerError, table_digest
from .session import Session
from .competitors import hdpview, identity, privtree
from .ripost import DepthSeries, ripost
from .sampling import BACKEND, add_laplace, exponential_choice, laplace_release, laplace_release_many
from .tensor import CountTensor, DataDerivedDomainWarning, Domain, read_table
from .view import BlockView, DenseView, MarginalView, SampleView, Workload, load_view, rmse, true_answers
from .viewfile import ViewFileError

__all__ = ["BACKEND", "BlockView", "BudgetExceeded", "BudgetNode", "CountTensor", "DataDerivedDomainWarning",
           "DenseView", "DepthSeries", "Domain", "Ledger", "LedgerError", "METHODS", "MarginalView", "SampleView",
           "Session", "ViewFileError", "load_view", "PrivacyBudget", "Workload", "build_view", "table_digest",
           "add_laplace", "exponential_choice", "hdpview", "identity", "laplace_release",
           "laplace_release_many", "privtree", "read_table", "ripost", "rmse", "true_answers"]
