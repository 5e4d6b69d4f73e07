"""Performance reports with plots, and the one-command demo.

:mod:`tinynpu.report.figures` draws each figure from stats dicts and returns
the data it drew; :mod:`tinynpu.report.suite` runs workloads through the
compiler and simulator; :mod:`tinynpu.report.markdown` writes the index;
:mod:`tinynpu.report.cli` registers ``tinynpu report`` and ``tinynpu demo``.

Nothing is imported here, so ``tinynpu --help`` and the other commands do not
pay for matplotlib; the report modules import it when a report is drawn.
"""
