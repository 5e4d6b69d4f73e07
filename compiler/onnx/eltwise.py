"""Old path of :mod:`tinynpu.compiler.onnx.lower.eltwise`, kept for ``tests/test_rtl_cosim.py`` (for now)."""

from tinynpu.compiler.onnx.lower.eltwise import add_compiled, term_scales

__all__ = ["add_compiled", "term_scales"]
