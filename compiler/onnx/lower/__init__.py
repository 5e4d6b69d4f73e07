"""Lowering: the typed steps to accelerator programs, a DRAM plan and the weights' places in the image.

- :mod:`.plan`: what runs where, the liveness plan of DRAM (:mod:`.memory`),
  the weights reserved in the image;
- :mod:`.programs`: every accelerator step's programs from the compiler's
  conv2d and matmul workloads, cached by shape and epilogue form;
- :mod:`.eltwise`: the residual-add program, built through the compiler's
  :class:`~tinynpu.compiler.emitter.Emitter` like every other program.
"""
