"""hieramas_jax.bench: the speed benchmarks behind experiments/bench_*.py (see docs/architecture.md)."""
