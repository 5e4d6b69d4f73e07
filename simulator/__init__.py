"""tinynpu.simulator: a functional and cycle-approximate model of the accelerator.

Public API: :class:`Machine`, :class:`SimFault`, :class:`Stats`.

Modules: ``decode`` (vectorized decode and static fault checks),
``semantics`` (scratchpads, DRAM, each instruction's semantics), ``timing``
(dispatch, queues, tokens, DRAM port: the isa.yaml timing rules),
``hazards`` (the vector-clock data-race sanitizer), ``stats`` (the stats
contract), ``trace`` (Perfetto trace and per-instruction log), ``machine``
(the API), ``cli`` (``tinynpu sim``), ``bench`` (``tinynpu bench sim``).

``core.c`` is the native core: ``timing``, ``semantics`` (integer configs)
and ``hazards`` again in C, statement by statement, for speed; ``native``
builds and calls it.  A change to the rules goes into both, and
``tests/test_sim_native.py`` fails until they agree.
"""

from tinynpu.simulator.faults import SimFault
from tinynpu.simulator.machine import Machine
from tinynpu.simulator.stats import Stats

__all__ = ["Machine", "SimFault", "Stats"]
