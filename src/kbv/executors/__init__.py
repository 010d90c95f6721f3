"""How ``kbv run`` spreads a batch: the build pool ahead of the lanes (:mod:`.builds`), one lane per
GPU or several on cpu (:mod:`.lanes`), and Ray tasks over a cluster (:mod:`.ray_executor`, needs the
``ray`` extra). The dispatcher that feeds them is :func:`kbv.batch.run_batch`."""
