"""Training batches as a pure function of (seed, step): a resumed run reads exactly the batches an
uninterrupted one would (every learned method of the suite draws its batches here)."""

from __future__ import annotations

import numpy as np


def batch_indices(seed: int, step: int, batch: int, num_items: int) -> np.ndarray:
  """The query indices of training step `step`: epochs of seeded permutations, read `batch` at a time.

  Raises:
    ValueError: no items or a non-positive batch.
  """
  if num_items < 1:
    raise ValueError("training needs at least one training query")
  if batch < 1:
    raise ValueError(f"batch must be >= 1, got {batch}")
  start = step * batch
  epoch, pos = divmod(start, num_items)
  out: list[int] = []
  while len(out) < batch:
    perm = np.random.default_rng([seed, epoch]).permutation(num_items)
    out.extend(perm[pos:pos + batch - len(out)].tolist())
    epoch, pos = epoch + 1, 0
  return np.asarray(out, np.int64)
