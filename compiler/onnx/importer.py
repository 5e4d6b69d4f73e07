"""Old path of :mod:`tinynpu.compiler.onnx.frontend.importer`, kept for ``explore/workloads.py`` (for now)."""

from tinynpu.compiler.onnx.frontend.importer import import_model

__all__ = ["import_model"]
