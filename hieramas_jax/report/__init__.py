"""hieramas_jax.report (see docs/architecture.md)."""
