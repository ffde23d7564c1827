"""Results: the typed model (Run -> Benchmark -> ResultSet) and its store, the metrics registry,
statistics, profiles' stage rules and run-against-run comparison."""
