"""``register_intrinsics(config)``: tinynpu's ``tmm`` as a TVM tensor intrinsic, for any config.

The description is the ISA's ``tmm`` with ``m = n = k = 1`` and ``accumulate``
set (isa.yaml: ``acc[T x T] += A_reg[T x T] @ B_reg[T x T]^T``), for the
config's tile edge T and element types; its operands live in the scopes of
:mod:`~tinynpu.compiler.tvm.scopes`.  The implementation is the lesson's
``T.call_extern("tmm<T>", C.access_ptr("w"), A.access_ptr("r"), B.access_ptr("r"), sa, sb, sc)``;
the lowering (:mod:`~tinynpu.compiler.tvm.calls`) checks every such call
against the :class:`Intrinsic` of the config it lowers for: the name, and
the scope, element type, shape and row pitch of each operand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tinynpu.compiler.schedule import intrinsic as intrinsic_name
from tinynpu.compiler.tvm.require import require_tvm
from tinynpu.compiler.tvm.scopes import tvm_scope_of
from tinynpu.isa import ArchConfig, load_config, load_isa


@dataclass(frozen=True)
class Intrinsic:
    """tinynpu's ``tmm`` as registered with TVM for one config.

    Attributes:
        name: The name it is registered under and the extern call it lowers to (``tmm16`` at T = 16).
        tile: The config's tile edge T (each operand is T x T).
        input_dtype: Element type of the A and B operands (``int8``, ``float32``).
        acc_dtype: Element type of the accumulator (``int32``, ``float32``).
        scopes: TVM scopes of the operands, in call order: accumulator, A, B.
        summary: The ISA's one-line description of ``tmm``.
        config: The config's name.
    """

    name: str
    tile: int
    input_dtype: str
    acc_dtype: str
    scopes: tuple[str, str, str]
    summary: str
    config: str


def intrinsic_for(cfg: ArchConfig) -> Intrinsic:
    """The :class:`Intrinsic` of ``cfg`` (what :func:`register_intrinsics` registers; no TVM needed)."""
    tmm = load_isa().by_mnemonic["tmm"]
    return Intrinsic(name=intrinsic_name(cfg), tile=cfg.tile, input_dtype=cfg.input_dtype, acc_dtype=cfg.acc_dtype,
                     scopes=(tvm_scope_of("acc"), tvm_scope_of("a_reg"), tvm_scope_of("b_reg")),
                     summary=tmm.summary, config=cfg.name)


def _functions(spec: Intrinsic) -> tuple[Any, Any]:
    """The description and implementation PrimFuncs of ``spec`` (TVMScript, sizes and types from the config)."""
    from tvm.script import tirx as T

    t, in_dt, acc_dt = spec.tile, spec.input_dtype, spec.acc_dtype
    acc_scope, a_scope, b_scope = spec.scopes
    # int8 products are summed in int32: T.cast widens the operands as the ISA does (and is no cast at all
    # when the types agree, as in the fp32 config), so the description matches the user's computation.

    @T.prim_func(s_tir=True)
    def desc(a: T.handle, b: T.handle, c: T.handle) -> None:
        A = T.match_buffer(a, (t, t), in_dt, offset_factor=t, scope=a_scope)
        B = T.match_buffer(b, (t, t), in_dt, offset_factor=t, scope=b_scope)
        C = T.match_buffer(c, (t, t), acc_dt, offset_factor=t, scope=acc_scope)
        with T.sblock("root"):
            T.reads(C[0:t, 0:t], A[0:t, 0:t], B[0:t, 0:t])
            T.writes(C[0:t, 0:t])
            for i, j, k in T.grid(t, t, t):
                with T.sblock(""):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    C[vi, vj] = C[vi, vj] + T.cast(A[vi, vk], acc_dt) * T.cast(B[vj, vk], acc_dt)

    name = spec.name

    @T.prim_func(s_tir=True)
    def impl(a: T.handle, b: T.handle, c: T.handle) -> None:
        sa = T.int32()
        sb = T.int32()
        sc = T.int32()
        A = T.match_buffer(a, (t, t), in_dt, offset_factor=t, strides=[sa, 1], scope=a_scope)
        B = T.match_buffer(b, (t, t), in_dt, offset_factor=t, strides=[sb, 1], scope=b_scope)
        C = T.match_buffer(c, (t, t), acc_dt, offset_factor=t, strides=[sc, 1], scope=acc_scope)
        with T.sblock("root"):
            T.reads(C[0:t, 0:t], A[0:t, 0:t], B[0:t, 0:t])
            T.writes(C[0:t, 0:t])
            T.evaluate(T.call_extern(name, C.access_ptr("w"), A.access_ptr("r"), B.access_ptr("r"), sa, sb, sc,
                                     dtype="int32"))

    return desc, impl


def register_intrinsics(config: ArchConfig | str = "default") -> Intrinsic:
    """Register ``tmm<T>`` with TVM for ``config`` (a config, its name or YAML path) and return it.

    ``sch.tensorize(loop, intrinsic.name)`` then maps a T x T x T block onto it.  Registering again (another
    config with the same tile edge, e.g. ``fp32`` after ``default``) replaces the earlier registration.

    Raises:
        UsageError: Apache TVM is not installed at the pinned versions (saying how to install it).
    """
    require_tvm("tinynpu.compiler.tvm.register_intrinsics")
    from tvm import s_tir

    cfg = load_config(config) if isinstance(config, str) else config
    spec = intrinsic_for(cfg)
    desc, impl = _functions(spec)
    s_tir.TensorIntrin.register(spec.name, desc, impl, override=True)
    return spec


__all__ = ["Intrinsic", "intrinsic_for", "register_intrinsics"]
