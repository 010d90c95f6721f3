"""Many verifications: the evaluator (jobs out, verdicts back), the batch plan and runner, the
result store, baseline caching, the executors and the aggregate metrics."""
