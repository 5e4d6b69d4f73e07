"""Old path of :mod:`tinynpu.compiler.onnx.verify.report`, kept for ``tinynpu/report/network.py`` (for now)."""

from tinynpu.compiler.onnx.verify.report import plot_layers

__all__ = ["plot_layers"]
