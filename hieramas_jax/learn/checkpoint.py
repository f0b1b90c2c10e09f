"""Orbax checkpoints for the learned parts: the latest state (resume) and the best by validation.

Two managers under one directory, because one manager cannot do both: with `best_fn` and
`max_to_keep`, orbax prunes by metric, which may delete the latest step a resumed run needs.
The reference code's inference loads the last checkpoint instead of the best (a defect); callers
here ask for `restore_best` explicitly.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp


def params_sha256(tree: Any) -> str:
  """A fingerprint of a parameter pytree (leaf order, shapes, dtypes and bytes)."""
  digest = hashlib.sha256()
  for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
    arr = np.asarray(leaf)
    digest.update(jax.tree_util.keystr(path).encode())
    digest.update(str(arr.dtype).encode() + str(arr.shape).encode())
    digest.update(np.ascontiguousarray(arr).tobytes())
  return digest.hexdigest()


class CheckpointError(RuntimeError):
  """Nothing to restore, or a checkpoint does not match the expected state."""


class Checkpointer:
  """`save(step, state, val_metric)`; `restore_latest(template)`; `restore_best(template)`.

  `val_metric` is "higher is better" (validation accuracy or mean reward). Saves are synchronous,
  so a process killed right after `save` returns still has the checkpoint.
  """

  def __init__(self, directory: str | os.PathLike, *, keep_latest: int = 1):
    self.directory = pathlib.Path(directory).resolve()
    common = dict(enable_async_checkpointing=False, create=True)
    self._latest = ocp.CheckpointManager(
        self.directory / "latest", options=ocp.CheckpointManagerOptions(max_to_keep=keep_latest, **common))
    self._best = ocp.CheckpointManager(
        self.directory / "best", options=ocp.CheckpointManagerOptions(
            max_to_keep=1, best_fn=lambda m: m["val_metric"], best_mode="max",
            keep_checkpoints_without_metrics=False, **common))

  def save(self, step: int, state: Any, val_metric: float | None = None) -> None:
    step = int(step)
    if self._latest.latest_step() != step:
      self._latest.save(step, args=ocp.args.StandardSave(state), force=True)
    if val_metric is not None:
      if self._best.latest_step() != step:
        self._best.save(step, args=ocp.args.StandardSave(state), metrics={"val_metric": float(val_metric)},
                        force=True)

  def latest_step(self) -> int | None:
    return self._latest.latest_step()

  def best_step(self) -> int | None:
    return self._best.best_step()

  def _restore(self, manager, step, template):
    if step is None:
      raise CheckpointError(f"no checkpoint under {manager.directory}")
    abstract = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, template)
    try:
      restored = manager.restore(step, args=ocp.args.StandardRestore(abstract))
    except (ValueError, KeyError) as e:
      raise CheckpointError(f"checkpoint {manager.directory}/{step} does not match the state: {e}") from e
    # Orbax returns device-committed arrays; freshly computed ones are uncommitted, and jit keys its
    # cache on that, so without this every jitted step would compile a second time after a resume.
    return jax.tree_util.tree_map(lambda x: jnp.asarray(np.asarray(x)) if isinstance(x, jax.Array) else x, restored)

  def restore_latest(self, template: Any) -> Any:
    """The last saved state, shaped like `template` (raises CheckpointError if none)."""
    return self._restore(self._latest, self._latest.latest_step(), template)

  def restore_best(self, template: Any) -> Any:
    """The state with the highest validation metric (raises CheckpointError if none)."""
    return self._restore(self._best, self._best.best_step(), template)

  def close(self) -> None:
    self._latest.close()
    self._best.close()
