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


__all__ = ["lower_blocks", "prim_func"]
