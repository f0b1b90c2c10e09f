"""Builds runs from flags: splits, pool, backend, method; run directories, writers, provenance."""
