"""The one digest of a query's id: the fold of every per-query key and generator of every method.

A method's answer to a query must depend on (seed, item id) only, never on the order queries are
solved in, so per-query randomness is drawn from a stream keyed by this fold. crc32 of the UTF-8 id:
stable across runs, processes and Python versions (unlike `hash`), and a 32-bit value that fits both
`jax.random.fold_in` and a numpy `SeedSequence` entry. Changing it changes every method's draws.
"""

from __future__ import annotations

import zlib


def item_fold(item_id: str) -> int:
  """The fold of a query in every per-query key and generator: crc32 of its id."""
  return zlib.crc32(item_id.encode())
