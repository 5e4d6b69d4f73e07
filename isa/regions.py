"""The small expression language of an instruction's ``accesses`` in isa.yaml.

An access names the rows of a scratchpad (``rows: [lo, hi]``, half-open) or
the 2-D DRAM footprint (``footprint: [addr, stride, rows, row_bytes]``) an
instruction reads or writes, as expressions over its operands.  The same
expressions become the Python race checker's per-opcode functions, the
numpy columns the stats sum, and the C core's access table (a generated
header), so they are parsed once here and translated to each target.

The language is Python's expression syntax restricted to integers: operand
names, ``T`` (the tile edge), integer literals, ``+ - *`` and ``//`` (floor
division of non-negative values, such as ``(255 + T) // T``), comparisons,
``and``/``or``/``not``, ``a if c else b``, ``elem_bytes(s)``, the element
size of a scratchpad given by a scope-valued operand or a scope name in
quotes (``elem_bytes('acc')``), and ``scope_rows(s)``, its number of rows.
An instruction's static ``checks`` use the same language, and the RTL dispatcher's range
checks are generated from both (:func:`to_sv`, :mod:`tinynpu.isa.gen_verilog_checks`).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Mapping, Sequence
from types import CodeType
from typing import Any

import numpy as np

# ``//`` is C's ``/`` too: every operand and T is non-negative, where the two agree.
_BINOPS: dict[type, str] = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//"}
_COMPARE: dict[type, str] = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
                             ast.GtE: ">="}
TILE = "T"  # the tile edge, the one name that is not an operand
# function -> (Python table indexed by scope id, its C array)
FUNCTIONS = {"elem_bytes": ("eb", "R->elem_bytes"), "scope_rows": ("srows", "R->sp_rows")}


class ExprError(ValueError):
    """An expression outside the language; the message says what and where in the text."""


@functools.lru_cache(maxsize=1024)
def parse(text: str | int, operands: tuple[str, ...], scope_operands: tuple[str, ...],
          scopes: tuple[str, ...]) -> ast.expr:
    """Parse and check one expression.

    The tree is cached and shared by every caller (the simulator's decoder, the C and Verilog generators), and
    compiled code is cached by its identity, so it is read-only: a caller that rewrites it works on a copy.

    Args:
        text: the expression (a YAML integer is taken as a literal).
        operands: the instruction's operand names.
        scope_operands: those whose value is a scope id (allowed in ``elem_bytes``).
        scopes: scope names (allowed quoted in ``elem_bytes``).

    Raises:
        ExprError: a syntax error, an unknown name or a construct outside the language.
    """
    try:
        tree = ast.parse(str(text), mode="eval").body
    except SyntaxError as exc:
        raise ExprError(f"{text!r} is not an expression ({exc.msg})") from None
    callees = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and id(node) not in callees and node.id not in operands and node.id != TILE:
            raise ExprError(f"{text!r} names {node.id!r}, which is neither an operand ({', '.join(operands)}) "
                            f"nor {TILE}")
        if isinstance(node, ast.Call):
            arg = node.args[0] if len(node.args) == 1 and not node.keywords else None
            good_arg = (isinstance(arg, ast.Name) and arg.id in scope_operands) or (
                isinstance(arg, ast.Constant) and arg.value in scopes)
            if not (isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS and good_arg):
                raise ExprError(f"{text!r}: the only calls are elem_bytes(s) and scope_rows(s), s a scope "
                                f"operand or a quoted scope name of {', '.join(scopes)}")
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, int | str) or isinstance(node.value, bool):
                raise ExprError(f"{text!r}: literal {node.value!r} is not an integer")
        elif isinstance(node, ast.BinOp) and type(node.op) not in _BINOPS:
            raise ExprError(f"{text!r}: only + - * // are allowed, not {type(node.op).__name__}")
        elif isinstance(node, ast.Compare) and not all(type(o) in _COMPARE for o in node.ops):
            raise ExprError(f"{text!r}: comparisons are == != < <= > >=")
        elif isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.USub | ast.Not):
            raise ExprError(f"{text!r}: the unary operators are - and not")
        elif not isinstance(node, ast.Name | ast.Call | ast.Constant | ast.BinOp | ast.Compare | ast.UnaryOp
                            | ast.BoolOp | ast.IfExp | ast.Load | ast.operator | ast.cmpop | ast.boolop
                            | ast.unaryop):
            raise ExprError(f"{text!r}: {type(node).__name__} is outside the access-expression language")
    return tree


@functools.lru_cache(maxsize=4096)  # parsed nodes are cached by parse(): the decoder asks on every load
def names(node: ast.expr) -> tuple[str, ...]:
    """The operands ``node`` names, in order of appearance, each once (not ``T``, not function names)."""
    callees = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
    found = [n for n in ast.walk(node) if isinstance(n, ast.Name) and id(n) not in callees and n.id != TILE]
    found.sort(key=lambda n: (n.lineno, n.col_offset))
    return tuple(dict.fromkeys(n.id for n in found))


def to_python(node: ast.expr, scope_ids: Mapping[str, int], name: Callable[[str], str], *,
              vector: bool = False) -> str:
    """Python source for ``node``; ``name`` maps an operand or ``T`` to a variable.

    ``eb`` and ``srows`` (element sizes and row counts) are indexed by scope id.  With ``vector``
    the source works on numpy columns (``np.where`` for ``if``, ``&``/``|``/``~`` for the logic).
    """
    def go(n: ast.expr) -> str:
        if isinstance(n, ast.Name):
            return name(n.id)
        if isinstance(n, ast.Constant):
            return str(n.value)
        if isinstance(n, ast.Call):
            arg, table = n.args[0], FUNCTIONS[n.func.id][0]  # type: ignore[attr-defined]
            return f"{table}[{scope_ids[str(arg.value)] if isinstance(arg, ast.Constant) else go(arg)}]"
        if isinstance(n, ast.BinOp):
            return f"({go(n.left)} {_BINOPS[type(n.op)]} {go(n.right)})"
        if isinstance(n, ast.UnaryOp):
            if isinstance(n.op, ast.USub):
                return f"(-{go(n.operand)})"
            return f"(~{go(n.operand)})" if vector else f"(not {go(n.operand)})"
        if isinstance(n, ast.Compare):
            parts = [f"({go(a)} {_COMPARE[type(op)]} {go(b)})"
                     for a, op, b in zip([n.left, *n.comparators[:-1]], n.ops, n.comparators, strict=True)]
            return "(" + (" & " if vector else " and ").join(parts) + ")"
        if isinstance(n, ast.BoolOp):
            joiner = (" & " if vector else " and ") if isinstance(n.op, ast.And) else (" | " if vector else " or ")
            return "(" + joiner.join(go(v) for v in n.values) + ")"
        assert isinstance(n, ast.IfExp)
        if vector:
            return f"np.where({go(n.test)}, {go(n.body)}, {go(n.orelse)})"
        return f"({go(n.body)} if {go(n.test)} else {go(n.orelse)})"

    return go(node)


def evaluate(node: ast.expr, scope_ids: Mapping[str, int], values: Mapping[str, Any], *, tile: int,
             elem_bytes: Sequence[int], scope_rows: Sequence[int], vector: bool = False) -> Any:
    """The value of ``node`` for operand ``values`` (numbers, or numpy columns with ``vector``).

    ``elem_bytes`` and ``scope_rows`` are indexed by scope id.
    """
    env: dict[str, Any] = {f"v_{k}": v for k, v in values.items()}
    env.update(np=np, tile=tile, eb=np.asarray(elem_bytes), srows=np.asarray(scope_rows))
    return eval(_compiled(node, tuple(scope_ids.items()), vector), env)  # noqa: S307 (node passed parse())


@functools.lru_cache(maxsize=4096)
def _compiled(node: ast.expr, scope_ids: tuple[tuple[str, int], ...], vector: bool) -> CodeType:
    """``node`` as compiled Python, once per parsed node: the simulator's decoder evaluates every access and
    check of every opcode on every program load, and translating and compiling them again each time was most
    of a small program's decoding time.  (Parsed nodes are cached by :func:`parse`, so their identity is a key.)"""
    code = to_python(node, dict(scope_ids), lambda n: "tile" if n == TILE else f"v_{n}", vector=vector)
    return compile(code, "<isa.yaml expression>", "eval")


Scalar = Callable[[Mapping[str, int], int, Sequence[int], Sequence[int]], Any]


def scalar_function(node: ast.expr, scope_ids: Mapping[str, int]) -> Scalar:
    """``node`` compiled once into ``f(values, tile, elem_bytes, scope_rows)`` for one instruction's operands."""
    code = to_python(node, scope_ids, lambda n: "tile" if n == TILE else f"v[{n!r}]")
    return eval(f"lambda v, tile, eb, srows: {code}")  # type: ignore[no-any-return]  # noqa: S307 (parsed)


def to_c(node: ast.expr, scope_ids: Mapping[str, int], name: Callable[[str], str]) -> str:
    """C source for ``node``; ``name`` maps an operand to its C variable, ``T`` is ``R->tile``."""
    def go(n: ast.expr) -> str:
        if isinstance(n, ast.Name):
            return "R->tile" if n.id == TILE else name(n.id)
        if isinstance(n, ast.Constant):
            return f"INT64_C({n.value!s})"
        if isinstance(n, ast.Call):
            arg, table = n.args[0], FUNCTIONS[n.func.id][1]  # type: ignore[attr-defined]
            scope = str(scope_ids[str(arg.value)]) if isinstance(arg, ast.Constant) else go(arg)
            return f"(int64_t){table}[{scope}]"
        if isinstance(n, ast.BinOp):  # C's / is // on the non-negative values of the language
            op = "/" if isinstance(n.op, ast.FloorDiv) else _BINOPS[type(n.op)]
            return f"({go(n.left)} {op} {go(n.right)})"
        if isinstance(n, ast.UnaryOp):
            return f"({'-' if isinstance(n.op, ast.USub) else '!'}{go(n.operand)})"
        if isinstance(n, ast.Compare):
            parts = [f"({go(a)} {_COMPARE[type(op)]} {go(b)})"
                     for a, op, b in zip([n.left, *n.comparators[:-1]], n.ops, n.comparators, strict=True)]
            return "(" + " && ".join(parts) + ")"
        if isinstance(n, ast.BoolOp):
            return "(" + (" && " if isinstance(n.op, ast.And) else " || ").join(go(v) for v in n.values) + ")"
        assert isinstance(n, ast.IfExp)
        return f"({go(n.test)} ? {go(n.body)} : {go(n.orelse)})"

    return go(node)


def to_sv(node: ast.expr, name: Callable[[str], str], call: Callable[[str, ast.expr], str], width: int, *,
          boolean: bool = False) -> str:
    """SystemVerilog source for ``node`` in unsigned ``width``-bit arithmetic (with ``boolean``: its truth, 1 bit).

    ``name`` maps an operand or ``T`` to a ``width``-bit expression, ``call`` a call's function name and
    argument node to one.  The caller picks ``width`` wide enough for every intermediate value (see
    :func:`upper_bound`); a subtraction below zero wraps, so a rule that subtracts must hold only where
    the field checks already passed (``rows - 1`` after ``rows >= 1``), as in the YAML.
    """
    def truth(n: ast.expr) -> str:
        if isinstance(n, ast.Compare):
            return " && ".join(f"({value(a)} {_COMPARE[type(op)]} {value(b)})"
                               for a, op, b in zip([n.left, *n.comparators[:-1]], n.ops, n.comparators, strict=True))
        if isinstance(n, ast.BoolOp):
            return (" && " if isinstance(n.op, ast.And) else " || ").join(f"({truth(v)})" for v in n.values)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            return f"!({truth(n.operand)})"
        return f"{value(n)} != '0"

    def value(n: ast.expr) -> str:
        if isinstance(n, ast.Name):
            return name(n.id)
        if isinstance(n, ast.Constant):
            return f"{width}'d{n.value!s}"
        if isinstance(n, ast.Call):
            return call(n.func.id, n.args[0])  # type: ignore[attr-defined]
        if isinstance(n, ast.BinOp):
            op = "/" if isinstance(n.op, ast.FloorDiv) else _BINOPS[type(n.op)]
            return f"({value(n.left)} {op} {value(n.right)})"
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return f"(-{value(n.operand)})"
        if isinstance(n, ast.IfExp):
            return f"(({truth(n.test)}) ? {value(n.body)} : {value(n.orelse)})"
        return f"{width}'({truth(n)})"  # a comparison or logic as a number: 0 or 1

    return truth(node) if boolean else value(node)


def upper_bound(node: ast.expr, name: Callable[[str], int], call: Callable[[str, ast.expr], int]) -> int:
    """The largest value ``node`` or any part of it takes, given each name's and call's largest value.

    A difference is bounded by its left side (the language's values are non-negative where rules use them).
    """
    def go(n: ast.expr) -> int:
        if isinstance(n, ast.Name):
            return name(n.id)
        if isinstance(n, ast.Constant):  # outside a call, parse() admits integer literals only
            assert isinstance(n.value, int)
            return n.value
        if isinstance(n, ast.Call):
            return call(n.func.id, n.args[0])  # type: ignore[attr-defined]
        if isinstance(n, ast.BinOp):
            left, right = go(n.left), go(n.right)
            value = {ast.Add: left + right, ast.Mult: left * right}.get(type(n.op), left)
            return max(value, left, right)
        if isinstance(n, ast.UnaryOp):
            return max(go(n.operand), 1)
        if isinstance(n, ast.Compare):
            return max(go(v) for v in [n.left, *n.comparators])
        if isinstance(n, ast.BoolOp):
            return max(go(v) for v in n.values)
        assert isinstance(n, ast.IfExp)
        return max(go(n.test), go(n.body), go(n.orelse))

    return go(node)


__all__ = ["FUNCTIONS", "TILE", "ExprError", "Scalar", "evaluate", "names", "parse", "scalar_function", "to_c",
           "to_python", "to_sv", "upper_bound"]
