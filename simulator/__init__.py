"""tinynpu.simulator: a functional and cycle-approximate model of the accelerator.

Public API: :class:`Machine`, :class:`SimFault`, :class:`Stats`.
"""

from tinynpu.simulator.faults import SimFault
from tinynpu.simulator.machine import Machine
from tinynpu.simulator.stats import Stats

__all__ = ["Machine", "SimFault", "Stats"]
