"""Design-space exploration: ``tinynpu sweep`` runs (config, workload) points on dask.distributed.

:mod:`~tinynpu.explore.spec` loads the sweep spec, :mod:`~tinynpu.explore.execute`
runs it, :mod:`~tinynpu.explore.report` writes ``index.md`` with the Pareto front.
Nothing in tinynpu imports this package; it uses everything below it.
"""
