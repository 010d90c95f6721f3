"""The reference side of a verification (reference worker only): problem build, input sets and
declared domains, timed-input mutations, the float64 oracle, output comparison, problem vetting."""
