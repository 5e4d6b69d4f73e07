"""tinynpu.compiler.onnx: ONNX networks end to end (import, int8 quantization, lowering, run, verify).

Public API::

    compile_onnx(path, *, batch=None, random_weights=None, calibrate=8, cfg=None) -> CompiledNetwork
    run_network(compiled, *, feeds=None, seed=0, extra_seeds=0) -> dict
    compile_llm(path, *, prompt_tokens, generate, cfg=None, seed=0) -> CompiledDecoder  (a decoder, :mod:`.llm`)
    run_llm(path, *, prompt_tokens, generate_tokens, cfg=None, seed=0) -> dict

Layout, one sub-package per job (each argues its own modules):

- :mod:`.frontend`: import, folding, quantization, the QDQ graph as typed steps;
- :mod:`.ir`: the typed steps every stage shares;
- :mod:`.lower`: the steps to accelerator programs, the DRAM plan;
- :mod:`.runtime`: the DRAM image and the execution of the steps;
- :mod:`.verify`: the three checks, the per-layer report, where differences come from;
- :mod:`.llm`: a decoder with past keys and values: prefill, greedy decode, the KV cache in DRAM;
- :mod:`.network`: the pipeline (``compile_onnx``); :mod:`.cli` and :mod:`.bench`: the commands.

``importer``, ``npu``, ``report`` and ``eltwise`` at this level are one-line
re-exports of names code outside the package still imports from there.
"""

from tinynpu.compiler.onnx.llm import CompiledDecoder, compile_llm, run_llm
from tinynpu.compiler.onnx.network import CompiledNetwork, compile_onnx
from tinynpu.compiler.onnx.verify.run import run_network

__all__ = ["CompiledDecoder", "CompiledNetwork", "compile_llm", "compile_onnx", "run_llm", "run_network"]
