"""``kbv serve``: verification and reward as an HTTP service, for RL loops and shared GPU nodes
(docs/serve.md). :mod:`kbv.serve.queue` (the SQLite job queue), :mod:`kbv.serve.requests` (request
checks), :mod:`kbv.serve.security` (tokens, limits), :mod:`kbv.serve.service` (problems, lanes,
dispatch), :mod:`kbv.serve.app` (the FastAPI routes), :mod:`kbv.serve.prometheus` (Prometheus text),
:mod:`kbv.serve.client` (``kbv.Client``, ``kbv.AsyncClient``)."""
