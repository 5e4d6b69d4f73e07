"""TIR index expressions evaluated with numpy over whole loop nests at once.

A statement inside loops ``i0, j0, k0`` runs once per point of their
iteration space; its index expressions are evaluated for every point in one
numpy pass (the loop variables bound to broadcast ``arange`` columns), which is
what makes a 1024^3 lowering take seconds rather than minutes.  Integer
semantics follow TIR: ``FloorDiv``/``FloorMod`` round toward minus infinity,
``Div``/``Mod`` toward zero.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tinynpu.errors import UsageError

Env = Mapping[Any, np.ndarray]  # a TIR Var -> its values over the iteration space


def _trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def _binary() -> dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]:
    return {
        "Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
        "FloorDiv": np.floor_divide, "FloorMod": np.mod,
        "Div": _trunc_div, "Mod": lambda a, b: a - _trunc_div(a, b) * b,
        "Min": np.minimum, "Max": np.maximum,
        "LT": np.less, "LE": np.less_equal, "GT": np.greater, "GE": np.greater_equal,
        "EQ": np.equal, "NE": np.not_equal, "And": np.logical_and, "Or": np.logical_or,
    }


_BINARY = _binary()


def evaluate(expr: Any, env: Env, where: str) -> np.ndarray:
    """The integer (or boolean) values of ``expr`` with its loop variables bound by ``env``.

    Raises:
        UsageError: a node the lowering does not evaluate (a buffer load in an index, a float, an unbound
            variable), naming it and ``where`` (the statement it appears in).
    """
    kind = type(expr).__name__
    if kind == "IntImm":
        return np.asarray(int(expr.value), dtype=np.int64)
    if kind == "Var":
        if expr in env:
            return env[expr]
        raise UsageError(f"{where}: the variable {expr} is not a loop variable of a loop around it; the lowering "
                         "evaluates indices over the loops of the schedule only.")
    if kind in _BINARY:
        a, b = evaluate(expr.a, env, where), evaluate(expr.b, env, where)
        if kind in ("FloorDiv", "FloorMod", "Div", "Mod") and np.any(b == 0):
            raise UsageError(f"{where}: {expr} divides by zero.")
        return np.asarray(_BINARY[kind](a, b))
    if kind == "Not":
        return np.logical_not(evaluate(expr.a, env, where))
    if kind == "Cast" and "int" in str(expr.dtype):
        return evaluate(expr.value, env, where)
    if kind == "Select":
        return np.where(evaluate(expr.condition, env, where), evaluate(expr.true_value, env, where),
                        evaluate(expr.false_value, env, where))
    raise UsageError(f"{where}: the index expression {expr} ({kind}) is not one the lowering evaluates (integer "
                     "arithmetic on loop variables and constants).")


def uses(expr: Any, variables: tuple[Any, ...]) -> bool:
    """Whether ``expr`` mentions any of ``variables``."""
    if type(expr).__name__ == "Var":
        return any(expr.same_as(v) for v in variables)
    return any(uses(getattr(expr, name), variables) for name in ("a", "b", "value", "condition", "true_value",
                                                                  "false_value") if hasattr(expr, name)
               and not isinstance(getattr(expr, name), (int, float, str)))


def linear_in(expr: Any, variables: tuple[Any, ...]) -> bool:
    """Whether ``expr`` is affine in ``variables`` (coefficients may depend on other variables).

    The variables may appear only under ``+``, ``-``, an integer cast, and ``*`` by a factor free of them:
    then finite differences at one point give the coefficients everywhere.
    """
    if not uses(expr, variables):
        return True
    kind = type(expr).__name__
    if kind == "Var":
        return True
    if kind in ("Add", "Sub"):
        return linear_in(expr.a, variables) and linear_in(expr.b, variables)
    if kind == "Mul":
        return ((not uses(expr.a, variables) and linear_in(expr.b, variables))
                or (not uses(expr.b, variables) and linear_in(expr.a, variables)))
    return kind == "Cast" and "int" in str(expr.dtype) and linear_in(expr.value, variables)


def flat_index(indices: Any, shape: tuple[int, ...]) -> Any:
    """The row-major element offset of ``indices`` into a buffer of ``shape``, as a TIR expression."""
    flat = None
    for index, extent in zip(indices, shape, strict=True):
        flat = index if flat is None else flat * extent + index
    return flat


__all__ = ["Env", "evaluate", "flat_index", "linear_in", "uses"]
