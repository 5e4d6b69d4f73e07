"""Old path of :mod:`tinynpu.compiler.onnx.lower.programs`, kept for ``explore/workloads.py`` (for now)."""

from tinynpu.compiler.onnx.lower.programs import groups_per_program

__all__ = ["groups_per_program"]
