"""Affine forms of integer index values: the one rule set every stage uses.

An index value's *form* is a `Dim` over symbols (shape symbols, loop and instance indices, tile
positions) that equals the value wherever it is defined. The frontend decides with forms whether an
index is a proven point (a `load`) or data (a `gather`); the KIR verifier proves point indices in
bounds with them; physical lowering proves accesses in bounds (else it guards them); the construction
analyses prove writes of different instances disjoint; the physical verifier re-derives the coordinates
it checks. They all apply these rules, so that what one stage calls affine the next one does too:

* an integer constant is its value; a shape value is its dim; a conversion to an integer dtype keeps
  the form of an integer operand; negation is `0 - x`;
* `x + y` and `x - y` of forms are forms;
* `x * y` is a form when a factor is a constant. Where the prover reasons about products of symbols
  (`Products.LAUNCH`: factors known at launch, such as a head's window `h * (D // H)`; `Products.ANY`:
  any factors, non-linear terms for Z3), those products are forms as well;
* `x // c` and `x % c` by a positive constant are forms when the dividend is proven non-negative:
  integer division truncates toward zero and a dim's `//` floors (`kir.dims`), and the two agree there.
  Without a proof (or a prover) the quotient has no form here; the physical verifier then models the
  truncation with an atom of its own.

`dims.dim_to_z3` / `dims.pred_to_z3` are the one translation of forms to Z3.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum

from .dims import DConst, Dim, PCmp, dim_bin
from .dtypes import DType
from .pointwise import Binary, BinaryFn, Cast, Constant, DimValue, Unary, UnaryFn
from .solver import linear_form

Prover = Callable[[Dim], bool]  # whether a form is proven non-negative


class Products(Enum):
    """Which products of two forms are forms (the prover's reach)."""

    CONSTANT = "constant"  # a factor is a constant: linear arithmetic
    LAUNCH = "launch"      # ... or a factor is known at launch (shape symbols only)
    ANY = "any"            # any product (a non-linear term)


def launch_known(d: Dim) -> bool:
    """Whether `d` is built from shape symbols and constants only (no loop, instance or position symbol,
    which all begin with an underscore)."""
    return all(not s.startswith("_") for s in d.symbols())


def constant_form(value: object) -> Dim | None:
    """The form of an integer literal (None for floats and bools)."""
    return DConst(int(value)) if isinstance(value, int) and not isinstance(value, bool) else None


def cast_form(x: Dim | None, to_int: bool) -> Dim | None:
    """A conversion keeps the form of an integer value when it converts to an integer dtype."""
    return x if to_int else None


def neg_form(x: Dim | None) -> Dim | None:
    return dim_bin("-", DConst(0), x) if x is not None else None


def binary_form(fn: BinaryFn | str, a: Dim | None, b: Dim | None, nonnegative: Prover | None = None,
                products: Products = Products.CONSTANT) -> Dim | None:
    """The form of integer `a fn b` (None when the rules give it none); `fn` is a `BinaryFn` or its name."""
    if a is None or b is None:
        return None
    name = fn.value if isinstance(fn, BinaryFn) else fn
    if name in ("add", "sub"):
        return dim_bin("+" if name == "add" else "-", a, b)
    if name == "mul":
        if a.is_const or b.is_const or products is Products.ANY or \
                (products is Products.LAUNCH and (launch_known(a) or launch_known(b))):
            return dim_bin("*", a, b)
        return None
    if name in ("floordiv", "mod") and isinstance(b, DConst) and b.value > 0 and nonnegative is not None \
            and nonnegative(a):
        return dim_bin("//" if name == "floordiv" else "%", a, b)
    return None


def linear_terms(d: Dim) -> tuple[int, dict[str, int]] | None:
    """`d` as `const + sum(coeff * symbol)` (None when a non-linear term remains)."""
    const, terms = linear_form(d)
    return (const, terms) if all(isinstance(a, str) for a in terms) else None  # type: ignore[return-value]


def nonnegative_by(prove: Callable[[PCmp], bool]) -> Prover:
    """A prover of `form >= 0` from a prover of predicates."""
    return lambda d: prove(PCmp(">=", d, DConst(0)))


def kir_form(op: object, forms: Mapping[int, Dim], nonnegative: Prover | None = None,
             products: Products = Products.CONSTANT) -> Dim | None:
    """The form of the (first) result of a KIR op from the forms of its operands (None: no form)."""
    if isinstance(op, Constant):
        return constant_form(op.value)
    if isinstance(op, DimValue):
        return op.dim
    if isinstance(op, Cast):
        return cast_form(forms.get(op.x.id), isinstance(op.dtype, DType) and op.dtype.is_int)
    if isinstance(op, Unary) and op.fn is UnaryFn.neg:
        return neg_form(forms.get(op.x.id))
    if isinstance(op, Binary):
        return binary_form(op.fn, forms.get(op.lhs.id), forms.get(op.rhs.id), nonnegative, products)
    return None


__all__ = ["Products", "Prover", "launch_known", "constant_form", "cast_form", "neg_form", "binary_form",
           "nonnegative_by", "kir_form", "linear_form", "linear_terms"]
