"""Privacy budget accounting for tree-shaped releases (paper 004, RIPOST).

A decomposition releases noisy statistics of blocks; a block's children partition its cells.
Releases about one block compose *sequentially* with every release about its ancestors (they
see the same records), while releases about disjoint sibling blocks compose in *parallel*.
So the privacy cost of the whole run is the largest, over root-to-leaf paths, of the sum of
the charges made on that path, and that is what this module bounds.

Every charge is recorded exactly and refused with :class:`BudgetExceeded` *before* anything is
released if some path through the node would then exceed the total. Nothing can be overspent,
not even by rounding: a double is a dyadic rational ``m * 2**e`` with ``e >= -1074``, so every
amount is kept as the exact integer ``x * 2**1074`` (cheap big-integer additions), and shown as
a :class:`fractions.Fraction`.

Each node keeps the largest sum of charges strictly below it, updated upwards on every charge,
so a charge costs O(depth) whatever the size of the tree.
"""

from __future__ import annotations

import math
from fractions import Fraction

from .. import _validate as V

_SHIFT = 1074
_ONE = 1 << _SHIFT


def _units(x: float) -> int:
    """The float ``x`` as the exact integer ``x * 2**1074``."""
    num, den = float(x).as_integer_ratio()       # den is a power of two, at most 2**1074
    return num * (_ONE // den)


def _fraction(u: int) -> Fraction:
    return Fraction(u, _ONE)


class BudgetExceeded(RuntimeError):
    """A charge would make some root-to-leaf path exceed the total budget."""


class BudgetNode:
    """One block of the decomposition. Create children with :meth:`child` (disjoint data)."""

    __slots__ = ("budget", "parent", "label", "children", "_spent", "_below")

    def __init__(self, budget: "PrivacyBudget", parent: "BudgetNode | None" = None, label: str = "") -> None:
        self.budget = budget
        self.parent = parent
        self.label = label
        self.children: list[BudgetNode] = []
        self._spent = 0          # exact units charged on this node
        self._below = 0          # largest sum of charges on a path strictly below this node

    @property
    def spent(self) -> Fraction:
        """The charges made on this node itself (exact)."""
        return _fraction(self._spent)

    def child(self, label: str = "") -> "BudgetNode":
        """A block over a subset of this block's cells, disjoint from its siblings'."""
        c = BudgetNode(self.budget, self, label)
        self.children.append(c)
        return c

    def _path_units(self) -> int:
        s, n = 0, self
        while n is not None:
            s += n._spent
            n = n.parent
        return s

    def path_spent(self) -> Fraction:
        """Sum of the charges from the root down to this node."""
        return _fraction(self._path_units())

    def below(self) -> Fraction:
        """Largest sum of charges on a path strictly below this node."""
        return _fraction(self._below)

    def remaining(self) -> float:
        """Budget still available for a charge on this node (rounded down to a float)."""
        r = _fraction(self.budget._total - self._path_units() - self._below)
        f = float(r)
        return f if Fraction(f) <= r else math.nextafter(f, -math.inf)

    def charge(self, epsilon: float, what: str = "") -> float:
        """Record a release of cost ``epsilon`` about this block; refuse it if it would overspend."""
        eps = V.positive_float("epsilon", epsilon)
        u = _units(eps)
        total = self._path_units() + self._below + u
        if total > self.budget._total:
            raise BudgetExceeded(
                f"charging {eps:.6g} for {what or 'a release'} on block {self.label or '?'} would spend "
                f"{float(_fraction(total)):.6g} of the budget {float(self.budget.total):.6g} on one path")
        self._spent += u
        n = self
        while n.parent is not None:               # propagate the deepest path sum upwards
            p = n.parent
            cand = n._spent + n._below
            if cand <= p._below:
                break
            p._below = cand
            n = p
        self.budget.ledger.append((self.label, eps, what))
        return eps


class PrivacyBudget:
    """The total epsilon of one view, and the ledger of every charge made against it."""

    def __init__(self, epsilon: float) -> None:
        eps = V.positive_float("epsilon", epsilon)
        self._total = _units(eps)
        self.ledger: list[tuple[str, float, str]] = []
        self.root = BudgetNode(self, None, "root")

    @property
    def total(self) -> Fraction:
        """The total budget, as an exact fraction."""
        return _fraction(self._total)

    def spent(self) -> Fraction:
        """The privacy cost so far: the largest path sum of charges (exact)."""
        return _fraction(self.root._spent + self.root._below)
