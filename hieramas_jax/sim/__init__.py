"""hieramas_jax.sim (see docs/architecture.md)."""
