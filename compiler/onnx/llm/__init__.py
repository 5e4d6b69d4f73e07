"""tinynpu.compiler.onnx.llm: a decoder's prefill and greedy decode on the simulator, the KV cache in DRAM.

- :mod:`.decoder`: a GPT-2-style decoder built with ``onnx.helper`` and its numpy float reference;
- :mod:`.interface`: what a decoder must have, and the checks before any work;
- :mod:`.steps`: one network per step shape from the decoder quantized once;
- :mod:`.image`: the run's one DRAM image (weights once, the KV cache appended in place);
- :mod:`.compile`: :func:`compile_llm`; :mod:`.generate`: the decode loop, checked step by step;
- :mod:`.figures`, :mod:`.run`: the figures and the report; :mod:`.cli`: the commands.
"""

from tinynpu.compiler.onnx.llm.compile import CompiledDecoder, compile_llm
from tinynpu.compiler.onnx.llm.run import run_llm

__all__ = ["CompiledDecoder", "compile_llm", "run_llm"]
