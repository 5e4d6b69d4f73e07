"""tinynpu.rtl: the Verilog RTL of the default int8 tinynpu and its co-simulation.

Public API:

* :func:`tinynpu.rtl.compare.cosimulate` — the same programs on the RTL (Verilator
  or Icarus, through cocotb; :mod:`tinynpu.rtl.runner` picks and builds) and on the
  simulator, compared output for output and instruction for instruction
  (:class:`~tinynpu.rtl.compare.CosimReport`).
* :func:`tinynpu.rtl.cosim.run_rtl` — raw RTL runs (:class:`~tinynpu.rtl.cosim.RtlJob`
  in, :class:`~tinynpu.rtl.cosim.RtlResult` out, with error flag and cause).
* :func:`tinynpu.rtl.randprog.random_program` — random valid, synchronized programs.
* :func:`tinynpu.rtl.synth.synthesize` — cells, transistors and area per module (Yosys).

The Verilog sources, the generated ISA header and the benches live next to
this file; see ``README.md`` here for the micro-architecture and interfaces.
"""
