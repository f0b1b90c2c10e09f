"""Orbax checkpoints for the learned parts: the latest state (resume) and the best by validation.

Two managers under one directory, because one manager cannot do both: with `best_fn` and
`max_to_keep`, orbax prunes by metric, which may delete the latest step a resumed run needs.
The reference code's inference loads the last checkpoint instead of the best (a defect); callers
here ask for `restore_best` explicitly.

Every orbax call in the process goes through one lock (`ORBAX_LOCK`): orbax keeps process-wide
state (one operation id, the `*.orbax-checkpoint-tmp` directories, a barrier on directory creation),
and fits running at once in one process (a table runs six) crashed inside it (a 300 s timeout on
`step_directory_creation`, `FileExistsError`). A save takes well under a second, so serialising
them costs little.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import threading
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from hieramas_jax.benchmarks.data import DataError


def params_sha256(tree: Any) -> str:
  """A fingerprint of a parameter pytree (leaf order, shapes, dtypes and bytes)."""
  digest = hashlib.sha256()
  for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
    arr = np.asarray(leaf)
    digest.update(jax.tree_util.keystr(path).encode())
    digest.update(str(arr.dtype).encode() + str(arr.shape).encode())
    digest.update(np.ascontiguousarray(arr).tobytes())
  return digest.hexdigest()


ORBAX_LOCK = threading.RLock()


class CheckpointError(RuntimeError, DataError):
  """Nothing to restore, or a checkpoint does not match the expected state (a user error: exit 2)."""


def save_tree(path: str | os.PathLike, tree: Any) -> None:
  """One pytree saved with orbax at `path` (replaced if there), under the process-wide lock."""
  with ORBAX_LOCK, ocp.StandardCheckpointer() as ckptr:
    ckptr.save(pathlib.Path(path).resolve(), tree, force=True)


def restore_tree(path: str | os.PathLike, template: Any) -> Any:
  """The pytree `save_tree` wrote at `path`, shaped like `template`; CheckpointError naming it if damaged."""
  abstract = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, template)
  try:
    with ORBAX_LOCK, ocp.StandardCheckpointer() as ckptr:
      return ckptr.restore(pathlib.Path(path).resolve(), abstract)
  except (ValueError, KeyError, OSError, TypeError) as e:
    raise CheckpointError(f"{path}: not a readable checkpoint of this state ({type(e).__name__}: "
                          f"{str(e)[:200]}); delete it and refit") from e


class Checkpointer:
  """`save(step, state, val_metric)`; `restore_latest(template)`; `restore_best(template)`.

  `val_metric` is "higher is better" (validation accuracy or mean reward). Saves are synchronous,
  so a process killed right after `save` returns still has the checkpoint.
  """

  def __init__(self, directory: str | os.PathLike, *, keep_latest: int = 1):
    self.directory = pathlib.Path(directory).resolve()
    common = dict(enable_async_checkpointing=False, create=True)
    with ORBAX_LOCK:
      self._make_managers(common, keep_latest)

  def _make_managers(self, common, keep_latest):
    self._latest = ocp.CheckpointManager(
        self.directory / "latest", options=ocp.CheckpointManagerOptions(max_to_keep=keep_latest, **common))
    self._best = ocp.CheckpointManager(
        self.directory / "best", options=ocp.CheckpointManagerOptions(
            max_to_keep=1, best_fn=lambda m: m["val_metric"], best_mode="max",
            keep_checkpoints_without_metrics=False, **common))

  def save(self, step: int, state: Any, val_metric: float | None = None) -> None:
    with ORBAX_LOCK:
      self._save(int(step), state, val_metric)

  def _save(self, step: int, state: Any, val_metric: float | None) -> None:
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
      with ORBAX_LOCK:
        restored = manager.restore(step, args=ocp.args.StandardRestore(abstract))
    except (ValueError, KeyError, OSError, TypeError) as e:
      raise CheckpointError(f"checkpoint {manager.directory}/{step} does not match the state ({e}); "
                            "delete the run directory's checkpoints and refit") from e
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
    with ORBAX_LOCK:
      self._latest.close()
      self._best.close()
