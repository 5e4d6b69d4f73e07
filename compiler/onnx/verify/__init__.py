"""Verification and report: a network run checked three ways, its figures and where differences come from.

- :mod:`.run`: :func:`run_network`, the run and its per-layer report;
- :mod:`.checks`: bit-exact against the integer reference, and against onnxruntime;
- :mod:`.describe`: the compiled network as JSON;
- :mod:`.report`: tables, the figure and the Markdown report;
- :mod:`.origins`: which operators a difference from onnxruntime comes from.
"""

from tinynpu.compiler.onnx.verify.checks import NetworkVerificationError
from tinynpu.compiler.onnx.verify.describe import describe
from tinynpu.compiler.onnx.verify.run import run_network

__all__ = ["NetworkVerificationError", "describe", "run_network"]
