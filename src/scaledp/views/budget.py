"""Privacy budget accounting for tree-shaped releases (paper 004, RIPOST).

A decomposition releases noisy statistics of blocks; a block's children partition its cells.
Releases about one block compose *sequentially* with every release about its ancestors (they
see the same records), while releases about disjoint sibling blocks compose in *parallel*.
So the privacy cost of the whole run is the largest, over root-to-leaf paths, of the sum of
the charges made on that path, and that is what this module bounds.

Every charge is recorded exactly (``fractions.Fraction`` of the float, which is exact in binary)
and refused with :class:`BudgetExceeded` *before* anything is released if some path through
the node would then exceed the total. Nothing can be overspent, not even by rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from .. import _validate as V


class BudgetExceeded(RuntimeError):
    """A charge would make some root-to-leaf path exceed the total budget."""


@dataclass(eq=False)
class BudgetNode:
    """One block of the decomposition. Create children with :meth:`child` (disjoint data)."""

    budget: "PrivacyBudget"
    parent: "BudgetNode | None" = None
    label: str = ""
    spent: Fraction = Fraction(0)
    children: list["BudgetNode"] = field(default_factory=list)

    def child(self, label: str = "") -> "BudgetNode":
        """A block over a subset of this block's cells, disjoint from its siblings'."""
        c = BudgetNode(self.budget, self, label)
        self.children.append(c)
        return c

    def path_spent(self) -> Fraction:
        """Sum of the charges from the root down to this node."""
        s, n = Fraction(0), self
        while n is not None:
            s += n.spent
            n = n.parent
        return s

    def _below(self) -> Fraction:
        """Largest sum of charges on a path strictly below this node."""
        best = Fraction(0)
        stack = [(c, c.spent) for c in self.children]
        while stack:
            n, s = stack.pop()
            best = max(best, s)
            stack.extend((c, s + c.spent) for c in n.children)
        return best

    def remaining(self) -> float:
        """Budget still available for a charge on this node (rounded down to a float)."""
        r = self.budget.total - self.path_spent() - self._below()
        f = float(r)
        return f if Fraction(f) <= r else math.nextafter(f, -math.inf)

    def charge(self, epsilon: float, what: str = "") -> float:
        """Record a release of cost ``epsilon`` about this block; refuse it if it would overspend."""
        eps = Fraction(V.positive_float("epsilon", epsilon))
        total = self.path_spent() + self._below() + eps
        if total > self.budget.total:
            raise BudgetExceeded(
                f"charging {float(eps):.6g} for {what or 'a release'} on block {self.label or '?'} would spend "
                f"{float(total):.6g} of the budget {float(self.budget.total):.6g} on one path")
        self.spent += eps
        self.budget.ledger.append((self.label, float(eps), what))
        return float(eps)


class PrivacyBudget:
    """The total epsilon of one view, and the ledger of every charge made against it."""

    def __init__(self, epsilon: float) -> None:
        self.total = Fraction(V.positive_float("epsilon", epsilon))
        self.ledger: list[tuple[str, float, str]] = []
        self.root = BudgetNode(self, None, "root")

    def spent(self) -> Fraction:
        """The privacy cost so far: the largest path sum of charges (exact)."""
        return self.root.spent + self.root._below()
