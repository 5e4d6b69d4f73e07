"""tinynpu.compiler.onnx: ONNX networks end to end (import, int8 quantization, lowering, run, verify).

Public API::

    compile_onnx(path, *, batch=None, random_weights=None, calibrate=8, cfg=None) -> CompiledNetwork
    run_network(compiled, *, feeds=None, seed=0, extra_seeds=0) -> dict
"""

from tinynpu.compiler.onnx.network import CompiledNetwork, compile_onnx, run_network

__all__ = ["CompiledNetwork", "compile_onnx", "run_network"]
