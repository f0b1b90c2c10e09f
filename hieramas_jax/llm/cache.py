"""On-disk response store: a rerun replays bit-exactly and a killed run resumes without paying again.

Layout: one sqlite file, `directory/responses.sqlite3`, in WAL mode, one row per full request key.
Why sqlite and not the JSONL shards this replaced: a shard cache has to read and parse every record
into memory at every process start (6 s and ~1 GB at 500k entries, and a sweep starts one process per
point), while an indexed file opens in about a millisecond and answers a lookup from its B-tree in
microseconds, with memory bounded by sqlite's page cache whatever the store's size.

Writes leave the event loop: `put` hands the row to one writer thread per store (and keeps it in a
small in-memory map, so this process replays it at once) and returns in microseconds; the thread
commits whatever has queued up as one transaction (group commit). Measured, a synchronous commit per
`put` cost the loop ~60 us of CPU and ~200 us of wall time (WAL checkpoints fsync), ten times the old
shard write, at a thousand calls per second. The price: a SIGKILL can lose the answers of the last
few milliseconds that were not committed yet (like the calls still in flight at that moment); `flush()`
waits for the commit, and `close()` flushes.

Crash safety and concurrency come from sqlite itself:
  * a process killed mid-commit leaves an uncommitted WAL frame that the next open discards (frames
    carry checksums), so a torn write never corrupts the file and a committed record is never lost
    to a killed process;
  * `synchronous=NORMAL` (no fsync per commit): a committed record is in the OS; a power cut could
    lose the last commits but leaves the file consistent (the old shards had no fsync either);
  * WAL lets any number of processes read while one writes; writers queue on sqlite's lock (busy
    timeout 60 s, in the writer thread, never blocking the event loop), and `INSERT OR IGNORE` keeps
    the first answer stored for a key, so two processes racing on one request both replay the same one.

Key: sha256 over the endpoint name and the canonical JSON of the request body exactly as sent (model id,
messages, sampling parameters with per-model quirks applied, `seed` = sample index). The API key is
a header, never part of the body, so it is in neither the key nor the row.

Row: key, endpoint, model, text, prompt_tokens, completion_tokens, cost_usd, attempts, latency_s (of
the original call, for audit). Replay is bit-exact: integers and IEEE doubles round-trip unchanged and
the text is stored as given; a text that is not valid Unicode (a lone surrogate, which JSON escapes
can produce) is stored as a UTF-8 `surrogatepass` BLOB in the same column and decoded back the same way.

Migration: JSONL shards (`directory/*.jsonl`) of the earlier cache are imported once, at open, each in
one transaction (a torn last line skipped and counted in `torn_lines`, as the old loader did); the
table `jsonl_imports` remembers each shard's name and size, so a later open only lists the directory.
The shards are left in place, untouched.
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
import math
import os
import atexit
import pathlib
import queue
import sqlite3
import threading
import time
import weakref
from typing import Any, Iterator, NamedTuple

from hieramas_jax.llm.errors import CacheCorruptError, CacheWriteError

STORE_NAME = "responses.sqlite3"
SCHEMA_VERSION = 2  # 2: finish_reason and reasoning_tokens (a v1 store gains them at open, as "" / 0)
BUSY_TIMEOUT_S = 60.0
READ_CACHE_KIB = 16 * 1024
_IMPORT_BATCH = 10_000
_COMMIT_BATCH = 1_000  # most rows per group commit
_STOP = object()

def enter_wal(conn: sqlite3.Connection) -> str:
  """`PRAGMA journal_mode=WAL`, retried while another process holds the lock; returns the mode.

  Why a loop: switching a new file into WAL needs an exclusive lock, and sqlite answers SQLITE_BUSY
  there at once, without calling the busy handler (measured: 1 of 360 opens failed when six processes
  opened one fresh store together). Every later statement waits in the busy handler as usual.
  """
  deadline = time.monotonic() + BUSY_TIMEOUT_S
  delay = 0.001
  while True:
    try:
      return conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    except sqlite3.OperationalError as e:
      if "locked" not in str(e) and "busy" not in str(e) or time.monotonic() > deadline:
        raise
      time.sleep(delay)
      delay = min(delay * 2, 0.05)


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))

_SCHEMA = ("""
CREATE TABLE IF NOT EXISTS responses (
  key TEXT NOT NULL UNIQUE,
  endpoint TEXT NOT NULL,
  model TEXT NOT NULL,
  text TEXT NOT NULL,
  prompt_tokens INTEGER NOT NULL,
  completion_tokens INTEGER NOT NULL,
  cost_usd REAL NOT NULL,
  attempts INTEGER NOT NULL,
  latency_s REAL NOT NULL,
  finish_reason TEXT NOT NULL DEFAULT '',
  reasoning_tokens INTEGER NOT NULL DEFAULT 0
)""", """
CREATE TABLE IF NOT EXISTS jsonl_imports (
  name TEXT PRIMARY KEY,
  size INTEGER NOT NULL,
  records INTEGER NOT NULL,
  torn_lines INTEGER NOT NULL
)""")
_SELECT = ("SELECT text, model, prompt_tokens, completion_tokens, cost_usd, attempts, finish_reason, "
           "reasoning_tokens FROM responses WHERE key = ?")
_COLUMNS = ("key, endpoint, model, text, prompt_tokens, completion_tokens, cost_usd, attempts, latency_s, "
            "finish_reason, reasoning_tokens")
_INSERT = f"INSERT OR IGNORE INTO responses ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
# Schema 1 -> 2: two columns with defaults (rows of a v1 store replay with finish_reason "" and 0).
_MIGRATE_1_TO_2 = ("ALTER TABLE responses ADD COLUMN finish_reason TEXT NOT NULL DEFAULT ''",
                   "ALTER TABLE responses ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0")


def canonical_json(obj: Any) -> bytes:
  """Sorted keys, no whitespace, ASCII: equal requests give equal bytes whatever the dict order."""
  return _ENCODER.encode(obj).encode("ascii")


def request_key(endpoint_name: str, canonical_body: bytes) -> str:
  """The cache key of a request body already in `canonical_json` form."""
  return hashlib.sha256(endpoint_name.encode("utf-8") + b"\n" + canonical_body).hexdigest()


class CachedResponse(NamedTuple):
  """What a replay needs to rebuild the original `CallResult` (latency aside)."""

  text: str
  model: str
  prompt_tokens: int
  completion_tokens: int
  cost_usd: float
  attempts: int
  finish_reason: str = ""
  reasoning_tokens: int = 0


def _storable_text(text: str) -> str | bytes:
  """`text` itself, or its UTF-8 `surrogatepass` bytes when sqlite could not store it as TEXT."""
  try:
    text.encode("utf-8")
    return text
  except UnicodeEncodeError:
    return text.encode("utf-8", "surrogatepass")


def iter_jsonl_shard(shard: str | os.PathLike) -> Iterator[tuple | None]:
  """Rows (in `responses` column order) of one JSONL shard of the earlier cache, streamed.

  Yields None once for a torn last line (a write the old cache never finished); such a line can only
  be the last one, without its newline.

  Raises:
    CacheCorruptError: a bad record anywhere else (file and line named).
  """
  shard = pathlib.Path(shard)
  with open(shard, "rb") as f:
    for number, line in enumerate(f, 1):
      complete = line.endswith(b"\n")
      if not line.strip():
        continue
      try:
        rec = json.loads(line)
        yield (rec["key"], rec.get("endpoint", ""), rec["model"], _storable_text(rec["text"]),
               int(rec["prompt_tokens"]), int(rec["completion_tokens"]), float(rec["cost_usd"]),
               int(rec["attempts"]), float(rec.get("latency_s", 0.0)), "", 0)
      except (ValueError, KeyError, TypeError) as e:
        if not complete:
          yield None
          continue
        raise CacheCorruptError(f"{shard}: line {number} is not a cache record ({e}); "
                                f"remove the shard or the line to go on") from None


class ResponseCache:
  """The sqlite response store of one cache directory (see the module docstring).

  Used from one event loop (the client calls `get`/`put` between awaits); a lock makes a stray call
  from another thread safe too. A `get` is one indexed sqlite lookup (~10-30 us); a `put` queues the
  row for the writer thread (a few us).

  Args:
    directory: folder of the store (created if missing); JSONL shards found there are imported once.

  Attributes:
    path: the sqlite file.
    imported: records imported from JSONL shards by this open.
    torn_lines: torn last lines skipped in the shards this open imported.

  Raises:
    CacheCorruptError: the file is not a response store (or one of a newer schema), or an old shard
      holds a bad record that is not a torn last line (then nothing of that shard is imported).
  """

  def __init__(self, directory: str | os.PathLike):
    self.directory = pathlib.Path(directory)
    self.directory.mkdir(parents=True, exist_ok=True)
    self.path = self.directory / STORE_NAME
    self.imported = 0
    self.torn_lines = 0
    self._lock = threading.Lock()
    self._conn: sqlite3.Connection | None = None
    self._pending: dict[str, CachedResponse] = {}  # queued for the writer, not committed yet
    self._queue: queue.SimpleQueue = queue.SimpleQueue()
    self._written = threading.Condition()
    self._queued = 0  # rows handed to the writer
    self._committed = 0  # rows the writer has committed (or found stored already)
    self._writer: threading.Thread | None = None  # started by the first put
    self._writer_error: BaseException | None = None
    try:
      # isolation_level=None: autocommit, so each put is one committed transaction; BEGIN where needed.
      conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None,
                             check_same_thread=False)
      self._conn = conn
      mode = enter_wal(conn)
      if mode.lower() != "wal":
        raise CacheCorruptError(f"{self.path}: sqlite refused WAL mode (got {mode!r}); "
                                "is the directory on a filesystem without shared memory (NFS)?")
      conn.execute("PRAGMA synchronous=NORMAL")
      # A fixed 16 MiB page cache holds every interior page of both B-trees up to a few million entries,
      # so a lookup reads just its two leaf pages; memory stays bounded whatever the store's size.
      conn.execute(f"PRAGMA cache_size=-{READ_CACHE_KIB}")
      self._ensure_schema()
      self._import_jsonl_shards()
    except sqlite3.DatabaseError as e:
      self.close()
      raise CacheCorruptError(f"{self.path} is not a usable response store ({e}); "
                              "move it away to start a new one") from None
    except BaseException:
      self.close()
      raise

  def _ensure_schema(self) -> None:
    conn = self._conn
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
      return
    if version > SCHEMA_VERSION:
      raise CacheCorruptError(f"{self.path} has schema version {version}; this code knows "
                              f"{SCHEMA_VERSION} (written by a newer hieramas-jax?)")
    conn.execute("BEGIN IMMEDIATE")  # two processes creating the store at once: one waits
    try:
      current = conn.execute("PRAGMA user_version").fetchone()[0]
      if current == 0:
        for statement in _SCHEMA:  # (not executescript: it would commit the open transaction first)
          conn.execute(statement)
      elif current == 1:
        for statement in _MIGRATE_1_TO_2:
          conn.execute(statement)
      if current < SCHEMA_VERSION:
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
      conn.execute("COMMIT")
    except BaseException:
      conn.execute("ROLLBACK")
      raise

  def _import_jsonl_shards(self) -> None:
    shards = sorted(self.directory.glob("*.jsonl"))
    if not shards:
      return
    conn = self._conn
    done = dict(conn.execute("SELECT name, size FROM jsonl_imports"))
    if all(done.get(shard.name) == shard.stat().st_size for shard in shards):
      return
    # A one-time import inserts keys in random order: a larger page cache while it runs saves most of
    # the index's page reads (64 MiB, given back below).
    conn.execute("PRAGMA cache_size=-65536")
    try:
      self._import_new_shards(shards, done)
    finally:
      conn.execute(f"PRAGMA cache_size=-{READ_CACHE_KIB}")

  def _import_new_shards(self, shards: list[pathlib.Path], done: dict[str, int]) -> None:
    conn = self._conn
    for shard in shards:
      size = shard.stat().st_size
      if done.get(shard.name) == size:
        continue
      conn.execute("BEGIN IMMEDIATE")
      try:
        # Another process may have imported it while we waited for the lock.
        row = conn.execute("SELECT size FROM jsonl_imports WHERE name = ?", (shard.name,)).fetchone()
        if row is not None and row[0] == size:
          conn.execute("COMMIT")
          continue
        records = torn = 0
        batch = []
        for rec in iter_jsonl_shard(shard):
          if rec is None:
            torn += 1
            continue
          batch.append(rec)
          if len(batch) >= _IMPORT_BATCH:
            records += self._insert_new(batch)
            batch = []
        records += self._insert_new(batch)
        conn.execute("INSERT OR REPLACE INTO jsonl_imports VALUES (?, ?, ?, ?)", (shard.name, size, records, torn))
        conn.execute("COMMIT")
      except BaseException:
        conn.execute("ROLLBACK")
        raise
      self.imported += records
      self.torn_lines += torn

  def _insert_new(self, rows: list[tuple]) -> int:
    before = self._conn.total_changes
    self._conn.executemany(_INSERT, rows)
    return self._conn.total_changes - before

  def _connection(self) -> sqlite3.Connection:
    if self._conn is None:
      raise RuntimeError(f"ResponseCache({str(self.directory)!r}) is closed")
    return self._conn

  def __len__(self) -> int:
    """Entries stored (after committing what this process queued); walks the whole index."""
    if self._writer is not None:
      self.flush()
    with self._lock:
      return int(self._connection().execute("SELECT COUNT(*) FROM responses").fetchone()[0])

  def __contains__(self, key: str) -> bool:
    return self.get(key) is not None

  def get(self, key: str) -> CachedResponse | None:
    """The stored answer of `key` (committed, or queued by this process), or None."""
    pending = self._pending.get(key)
    if pending is not None:
      return pending
    with self._lock:
      row = self._connection().execute(_SELECT, (key,)).fetchone()
    if row is None:
      return None
    text = row[0]
    if type(text) is bytes:
      text = text.decode("utf-8", "surrogatepass")
    return CachedResponse(text, row[1], row[2], row[3], row[4], row[5], row[6], row[7])

  def put(self, key: str, *, endpoint: str, model: str, text: str, prompt_tokens: int,
          completion_tokens: int, cost_usd: float, attempts: int, latency_s: float, finish_reason: str = "",
          reasoning_tokens: int = 0) -> None:
    """Record one answered call: replayed by this process at once, committed by the writer thread.

    A key already stored keeps its first answer (two processes racing on one request replay the same).

    Raises:
      CacheWriteError: an earlier commit failed (the run should stop rather than pay calls it cannot keep).
    """
    if not math.isfinite(cost_usd):
      raise ValueError(f"cost_usd must be finite, got {cost_usd!r}")
    self._raise_writer_error()
    if key in self._pending:
      return
    self._connection()
    prompt_tokens, completion_tokens, cost_usd, attempts = (int(prompt_tokens), int(completion_tokens),
                                                            float(cost_usd), int(attempts))
    self._pending[key] = CachedResponse(text, model, prompt_tokens, completion_tokens, cost_usd, attempts,
                                        str(finish_reason), int(reasoning_tokens))
    if self._writer is None:
      self._start_writer()
    with self._written:
      self._queued += 1
    self._queue.put((key, endpoint, model, _storable_text(text), prompt_tokens, completion_tokens, cost_usd,
                     attempts, float(latency_s), str(finish_reason), int(reasoning_tokens)))

  def _start_writer(self) -> None:
    self._writer = threading.Thread(target=self._write_loop, name=f"response-store-writer:{self.path}",
                                    daemon=True)
    self._writer.start()
    # A process that exits without close() still commits what it queued.
    atexit.register(_flush_at_exit, weakref.ref(self))

  def _write_loop(self) -> None:
    """The writer thread: commit every row that has queued up since the last commit, in one transaction."""
    try:
      conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None,
                             check_same_thread=False)
      conn.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.Error as e:
      self._fail(e)
      return
    try:
      stop = False
      while not stop:
        batch = [self._queue.get()]
        while len(batch) < _COMMIT_BATCH:
          try:
            batch.append(self._queue.get_nowait())
          except queue.Empty:
            break
        if any(row is _STOP for row in batch):
          stop = True
          batch = [row for row in batch if row is not _STOP]
        if not batch or self._writer_error is not None:
          continue
        try:
          conn.execute("BEGIN IMMEDIATE")
          conn.executemany(_INSERT, batch)
          conn.execute("COMMIT")
        except sqlite3.Error as e:
          if conn.in_transaction:
            conn.execute("ROLLBACK")
          self._fail(e)  # the rows stay in `_pending`: this process still replays them
          continue
        for row in batch:
          self._pending.pop(row[0], None)
        with self._written:
          self._committed += len(batch)
          self._written.notify_all()
    finally:
      conn.close()

  def _fail(self, error: BaseException) -> None:
    with self._written:
      self._writer_error = error
      self._written.notify_all()

  def _raise_writer_error(self) -> None:
    if self._writer_error is not None:
      raise CacheWriteError(f"{self.path}: committing responses failed ({type(self._writer_error).__name__}: "
                            f"{self._writer_error}); {len(self._pending)} answers are not stored") from None

  def flush(self) -> None:
    """Waits until every row `put` so far is committed.

    Raises:
      CacheWriteError: a commit failed.
    """
    with self._written:
      target = self._queued
      while self._committed < target and self._writer_error is None:
        self._written.wait()
    self._raise_writer_error()

  def close(self) -> None:
    """Commits what is queued, stops the writer thread and closes the store.

    Raises:
      CacheWriteError: a commit failed (the store is closed all the same).
    """
    writer, self._writer = self._writer, None
    if writer is not None:
      self._queue.put(_STOP)
      writer.join()
    with self._lock:
      if self._conn is not None:
        self._conn.close()
        self._conn = None
    self._raise_writer_error()

  def __enter__(self) -> ResponseCache:
    return self

  def __exit__(self, *exc) -> None:
    self.close()

  def __repr__(self) -> str:
    # No entry count: COUNT(*) walks the whole index, and a repr lands in logs at every run start.
    return f"ResponseCache({str(self.path)!r})"


def _flush_at_exit(ref: weakref.ref) -> None:
  cache = ref()
  if cache is not None and cache._writer is not None:  # pylint: disable=protected-access
    cache.close()
