"""The front half of TVM's own lowering, which turns a tensorized schedule into a plain loop nest.

``LowerInitBlock`` .. ``LowerOpaqueBlock`` (TVM's s_tir pipeline up to the
point where blocks disappear) leave loops, buffer allocations in the special
scopes, copies and the intrinsic's ``call_extern``.  ``InjectSoftwarePipeline``
runs where TVM's pipeline runs it: a loop annotated with
``software_pipeline_stage`` / ``software_pipeline_order`` becomes a prologue,
a steady state that copies iteration k+1 while computing iteration k, and an
epilogue, with the copied buffers doubled (double buffering as TVM writes it).
"""

from __future__ import annotations

from typing import Any

from tinynpu.errors import UsageError


def prim_func(schedule: Any) -> Any:
    """The PrimFunc of a ``tvm.s_tir.Schedule``, an ``IRModule`` with one PrimFunc, or a PrimFunc.

    Raises:
        UsageError: anything else, or a module with no or several PrimFuncs.
    """
    import tvm
    from tvm import s_tir, tirx

    if isinstance(schedule, s_tir.Schedule):
        schedule = schedule.mod
    if isinstance(schedule, tirx.PrimFunc):
        return schedule
    if isinstance(schedule, tvm.IRModule):
        funcs = [(gv.name_hint, f) for gv, f in schedule.functions.items() if isinstance(f, tirx.PrimFunc)]
        if len(funcs) == 1:
            return funcs[0][1]
        named = dict(funcs)
        if "main" in named:
            return named["main"]
        raise UsageError(f"the module holds {len(funcs)} PrimFuncs ({', '.join(sorted(named)) or 'none'}); "
                         "give the one to lower, or name it main.")
    raise UsageError(f"expected a tvm.s_tir.Schedule, an IRModule or a PrimFunc, not {type(schedule).__name__}.")


DOUBLE_BUFFER = "double_buffer_scope"


def _region_buffer(region: Any) -> Any:
    """The buffer of a block's read or write region (TVM 0.27: ``TensorRegion.source``)."""
    return region.source if hasattr(region, "source") else region.buffer


def annotated(func: Any, key: str) -> frozenset[str]:
    """Names of the buffers written by blocks annotated with ``key``, read before the passes drop annotations.

    ``double_buffer_scope`` (``sch.annotate(block, "double_buffer_scope", 0)``, TVM's double-buffer
    annotation) doubles the buffer the block writes; ``tinynpu.fold_init`` on a reduction's init block folds
    its zero fill into ``tmm`` (:mod:`~tinynpu.compiler.tvm.fold`).
    """
    names: set[str] = set()

    def visit(node: Any) -> None:
        kind = type(node).__name__
        if kind == "SBlockRealize":
            visit(node.block)
            return
        if kind == "SBlock" and key in node.annotations:
            names.update(_region_buffer(region).name for region in node.writes)
        for attr in ("body", "init", "then_case", "else_case"):
            child = getattr(node, attr, None)
            if child is not None:
                visit(child)
        for child in getattr(node, "seq", ()):
            visit(child)

    visit(func.body)
    return frozenset(names)


def lower_blocks(schedule: Any) -> Any:
    """``schedule``'s PrimFunc after TVM's passes up to ``LowerOpaqueBlock`` (see the module docstring)."""
    import tvm
    from tvm.s_tir import transform as st

    func = prim_func(schedule)
    passes = tvm.transform.Sequential([
        st.LowerInitBlock(), st.PlanAndUpdateBufferAllocationLocation(), st.ConvertBlocksToOpaque(),
        st.CompactBufferAllocation(), st.LowerMatchBuffer(), st.StmtSimplify(), st.InjectSoftwarePipeline(),
        st.StmtSimplify(), st.LowerOpaqueBlock(), st.StmtSimplify(),
    ])
    mod = passes(tvm.IRModule({"main": func}))
    return mod["main"]


__all__ = ["DOUBLE_BUFFER", "annotated", "lower_blocks", "prim_func"]
