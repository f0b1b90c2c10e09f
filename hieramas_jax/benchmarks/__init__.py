"""hieramas_jax.benchmarks (see docs/architecture.md)."""
