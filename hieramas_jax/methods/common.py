"""Pieces shared by the learned baselines: embeddings off the event loop, resumable parameter state.

Embedding is the slowest pure step of every learned method on CPU, and sentence-transformers is
synchronous: run on the event loop it would stall every other cell of the table. `embed` runs it in a
worker thread, one encoding job at a time (two threads on two cores would only fight each other).
"""

from __future__ import annotations

import asyncio
import collections
import json
import pathlib
import threading
from typing import Any, Sequence

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np

from hieramas_jax.fileio import atomic_write_bytes, atomic_write_json
from hieramas_jax.learn import checkpoint as checkpoint_lib
from hieramas_jax.learn.checkpoint import params_sha256
from hieramas_jax.learn.encoder import get_encoder
from hieramas_jax.methods.api import MethodError, RunContext

FINISHED_FILE = "finished.json"


class FairLock:
  """A lock handed to waiters in arrival order (`threading.Lock` is not: a thread that releases and
  re-acquires in a loop, as a chunked embedding job does, starves the others)."""

  def __init__(self):
    self._guard = threading.Lock()
    self._waiters: collections.deque[threading.Event] = collections.deque()
    self._held = False

  def acquire(self) -> None:
    with self._guard:
      if not self._held and not self._waiters:
        self._held = True
        return
      ready = threading.Event()
      self._waiters.append(ready)
    ready.wait()  # ownership is handed over by `release`

  def release(self) -> None:
    with self._guard:
      if self._waiters:
        self._waiters.popleft().set()
      else:
        self._held = False

  def __enter__(self) -> "FairLock":
    self.acquire()
    return self

  def __exit__(self, *exc) -> None:
    self.release()


# One encoding job at a time across every cell of the process, first come first served: two cells
# embedding the same texts (HieraMAS in both pool settings) would otherwise both miss the cache and do
# the work twice, and two jobs at once only fight over the same cores.
ENCODER_LOCK = FairLock()


def embed_now(texts: Sequence[str], model: str) -> np.ndarray:
  """[n, D] unit embeddings (encoder cache first), in the calling thread."""
  with ENCODER_LOCK:
    return get_encoder(model).encode(list(texts))


async def embed(texts: Sequence[str], model: str) -> np.ndarray:
  """`embed_now` in a worker thread, so the event loop keeps serving other cells."""
  return await asyncio.to_thread(embed_now, list(texts), model)


class QueryEmbeddings:
  """Question embeddings of one method instance, embedded once per text and then read from memory.

  A learned baseline embeds every training question once when its fit starts and every test question
  once in `prepare`; its steps and solves then read the table without touching the encoder lock, so
  they never wait behind another cell's long embedding job.
  """

  def __init__(self, model: str):
    self.model = model
    self._rows: dict[str, np.ndarray] = {}

  async def ensure(self, texts: Sequence[str]) -> None:
    missing = list(dict.fromkeys(t for t in texts if t not in self._rows))
    if missing:
      for text, row in zip(missing, await embed(missing, self.model)):
        self._rows[text] = row

  async def get(self, texts: Sequence[str]) -> np.ndarray:
    await self.ensure(texts)
    return np.stack([self._rows[t] for t in texts])


def role_texts(roles: Sequence[str], descriptions: Sequence[str]) -> list[str]:
  """Role-profile texts ("Role: description"), the same strings HieraMAS embeds (one cache entry each)."""
  return [f"{r}: {d}" for r, d in zip(roles, descriptions)]


async def off_loop(fn, *args, **kwargs):
  """`fn(*args, **kwargs)` in a worker thread, its JAX results ready before control returns.

  A jitted call's first run compiles for seconds, and JAX dispatches asynchronously: reading a result
  on the event loop (`float(loss)`, `np.asarray(choices)`) would block every other cell until the
  computation ends. Here both the compile and the wait happen in the worker thread.
  """
  return await asyncio.to_thread(lambda: jax.block_until_ready(fn(*args, **kwargs)))


def check_pool(method: str, built_for: str, ctx: RunContext) -> None:
  """A method built for one pool setting refuses a context of another (its models would not match)."""
  if ctx.pool.name != built_for:
    raise MethodError(f"{method} was built for pool {built_for!r}, the run uses {ctx.pool.name!r}")


class ParamState:
  """Latest training state of a learned baseline in one msgpack file, restored on resume.

  The state is a pytree {"params", "opt_state", "step"}; `save` after each update (an atomic rename:
  a kill leaves the previous state or the new one), `restore(template)` returns the saved one or None.
  One small file instead of an orbax checkpoint: a save costs milliseconds, not most of a second of
  the event loop every step.
  """

  FILE = "state.msgpack"

  def __init__(self, directory: str | pathlib.Path):
    self.path = pathlib.Path(directory) / self.FILE

  def restore(self, template: Any) -> Any | None:
    if not self.path.exists():
      return None
    try:
      state = flax.serialization.from_bytes(template, self.path.read_bytes())
    except (ValueError, KeyError, TypeError) as e:
      raise checkpoint_lib.CheckpointError(f"{self.path} does not match the method's state: {e}") from e
    return jax.tree_util.tree_map(jnp.asarray, state)

  def save(self, step: int, state: Any) -> None:
    del step
    atomic_write_bytes(self.path, flax.serialization.to_bytes(state))

  def finish(self, state: Any) -> None:
    """Marks the saved state as a finished fit: its step count and parameter hash, checked by `load_finished`."""
    atomic_write_json(self.path.parent.parent / FINISHED_FILE,
                      {"steps": int(state["step"]), "params_sha256": params_sha256(state["params"])})

  @classmethod
  def load_finished(cls, state_dir: str | pathlib.Path, template: Any, method: str) -> Any:
    """The finished fit's state under `state_dir` (as `finish` recorded it); MethodError when there is none."""
    done_path = pathlib.Path(state_dir) / FINISHED_FILE
    if not done_path.exists():
      raise MethodError(f"{state_dir} holds no finished {method} fit ({FINISHED_FILE} missing)")
    done = json.loads(done_path.read_text())
    state = cls(pathlib.Path(state_dir) / "checkpoints").restore(template)
    if state is None or int(state["step"]) != done["steps"] or params_sha256(state["params"]) != done["params_sha256"]:
      raise MethodError(f"{state_dir}: the saved {method} state is not the finished fit it records")
    return state
