"""Design-space exploration: ``tinynpu sweep`` runs (config, workload) points on dask.distributed.

:mod:`~tinynpu.explore.spec` loads the sweep spec, :mod:`~tinynpu.explore.execute`
runs it (caching each point under the code that computes it, :mod:`~tinynpu.explore.sources`),
:mod:`~tinynpu.explore.report` writes ``index.md`` with the Pareto front (each figure carrying
a digest of its data, :mod:`~tinynpu.explore.figures`);
:mod:`~tinynpu.explore.bench` measures the speed-up on Dask and what it is made of;
:mod:`~tinynpu.explore.worked_example` regenerates docs/sweep.md's worked example.
Nothing in tinynpu imports this package; it uses everything below it.
"""
