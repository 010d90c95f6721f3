"""How ``kbv run`` spreads a batch: the build pool ahead of the lanes (:mod:`.builds`), one lane per
GPU or several on cpu (:mod:`.lanes`), Ray tasks over a cluster (:mod:`.ray_executor`, needs the
``ray`` extra), and the GPU clock-throttle watch of GPU lanes (:mod:`.throttle`). The dispatcher
that feeds them is :func:`kbv.batch.runner.run_batch`; docs/scale.md has the design and the figures."""
