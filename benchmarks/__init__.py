"""Benchmarks (make bench): plan scale, deployment critical path, change minimality."""
