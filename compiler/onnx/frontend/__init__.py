"""The ONNX front end: from a ``.onnx`` file to the typed steps of :mod:`~tinynpu.compiler.onnx.ir`.

Its job ends where the accelerator's begins, so nothing here knows programs,
DRAM or the simulator:

- :mod:`.importer`: read, check and normalize the float model (opset, batch,
  constant folding, batch-norm and per-channel affine folding, seeded weights);
- :mod:`.qoperator`: a QOperator model rewritten as QDQ;
- :mod:`.quantize`: static int8 quantization with onnxruntime (and the scale
  alignments that keep joins and activations exact);
- :mod:`.requant`: the requantization scale onnxruntime computes;
- :mod:`.qdq`, :mod:`.patterns`, :mod:`.hostops`: the QDQ graph as steps, its
  integer patterns matched, and what is left to the host.

Sub-packages rather than flat modules: the ONNX path has four jobs with
different dependencies (this one needs ``onnx`` and ``onnxruntime``, the
lowering the compiler, the runtime the simulator, verification all of them),
and a package per job shows that in every import line.
"""
