"""Linking at compile time: every program of a run relocated to its final DRAM places and checked once.

A run of a network in its DRAM image relocates each compiled program to the
places of its operands (:meth:`~.image.DramImage.program`) and decodes and
checks the relocated words (:meth:`~.image.DramImage.machine_for`): a
linker's and a loader's work, done on the first run until now, where it was
most of the host's share of a transformer block's run.  The places depend on
the plan, the weights' places and each step's shapes only, but the runtime
chooses them step by step (in place or staged, attention's per-head
pitches); rather than a second copy of those choices, the linker runs the
runtime itself once with every program relocated and checked instead of
simulated (:attr:`~.layers.Accelerator.link_only`), in a scratch image with
this image's plan and weight places and a machine of its own, so the
network's DRAM is not written; the image then adopts the relocated programs
and their decodings.

A run still loads each program into the machine once per image (counted as
its loading): the machine compares the words against the decoding checked
here and decodes and checks again only what differs, so a program changed
after linking faults exactly as it did when every load decoded it.  A
program the run places differently from the link (never for a network's
own steps; tested) is relocated and checked at run time, as before.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from tinynpu.compiler.onnx.ir import Network
from tinynpu.compiler.onnx.lower.programs import ProgramCache
from tinynpu.compiler.onnx.runtime.execute import execute
from tinynpu.compiler.onnx.runtime.image import DramImage


def link_programs(net: Network, cache: ProgramCache, image: DramImage, feeds: dict[str, np.ndarray]) -> float:
    """Relocate and check every program a run of ``net`` in ``image`` loads; the seconds it took.

    ``feeds``: any valid inputs (the host steps between the programs run on them, and on the programs'
    outputs read as zeros, in the scratch image; no program's place depends on a value).

    Raises:
        OnnxError: a program that cannot be relocated to its places (an address or stride too wide).
        SimFault: a relocated program that fails its static checks (what loading it would raise).
    """
    t0 = time.perf_counter()
    scratch = image.scratch()
    evaluators = dict(net.evaluators)
    # the programs' outputs read as zeros here, so a host step after one may divide by zero or take log(0):
    # harmless for linking (no place depends on a value), and no warning of the user's run
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        execute(net, feeds, cache=cache, image=scratch, link_only=True)
    # the host's own preparation (an ONNX step's evaluator, built on first use) stays the first run's, as
    # writing the weights does: linking takes over the programs' relocation and checks, nothing of the host's
    net.evaluators.clear()
    net.evaluators.update(evaluators)
    image.adopt(scratch)
    image.touch()
    return time.perf_counter() - t0


__all__ = ["link_programs"]
