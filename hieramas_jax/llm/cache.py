"""On-disk response cache: a rerun replays bit-exactly and a killed run never pays for a call twice.

Layout: `directory/*.jsonl`, append-only shards. Each `ResponseCache` instance writes its own shard
(created on the first write, named by UTC time and pid), so two processes sharing a directory never
interleave bytes in one file, and a torn line (a process killed mid-write) can only be the last line
of a shard; such a line is ignored on load. Every record is flushed to the OS as it is written, so a
SIGKILL loses at most the record being written. At open, all shards are read into an in-memory index.

Key: sha256 over the endpoint name and the canonical JSON of the request body exactly as sent (model id,
messages, sampling parameters with per-model quirks applied, `seed` = sample index). The API key is
a header, never part of the body, so it is in neither the key nor the record.

Record (one JSON object per line): key, endpoint, model, text, prompt_tokens, completion_tokens,
cost_usd, attempts, latency_s (of the original call, for audit).
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
import math
import os
import pathlib
import secrets
import time
from typing import Any, NamedTuple

from hieramas_jax.llm.errors import CacheCorruptError

_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
_quote = json.encoder.encode_basestring_ascii  # str -> quoted JSON string, escapes lone surrogates


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


class ResponseCache:
  """Append-only JSONL response cache with an in-memory index.

  Single-threaded use from one event loop (the client calls `get`/`put` between awaits).

  Args:
    directory: folder of shards; created if missing.
  """

  def __init__(self, directory: str | os.PathLike):
    self.directory = pathlib.Path(directory)
    self.directory.mkdir(parents=True, exist_ok=True)
    self._index: dict[str, CachedResponse] = {}
    self._fd: int | None = None
    self.shard_path: pathlib.Path | None = None
    self.torn_lines = 0  # torn last lines skipped at load (each one a call killed mid-write)
    for shard in sorted(self.directory.glob("*.jsonl")):
      self._load_shard(shard)

  def _load_shard(self, shard: pathlib.Path) -> None:
    data = shard.read_bytes()
    lines = data.split(b"\n")
    # After the final "\n" split leaves b""; anything else there is a line whose write never finished.
    last = len(lines) - 1
    for number, line in enumerate(lines):
      if not line:
        continue
      try:
        rec = json.loads(line)
        entry = CachedResponse(rec["text"], rec["model"], rec["prompt_tokens"], rec["completion_tokens"],
                               rec["cost_usd"], rec["attempts"])
        key = rec["key"]
      except (ValueError, KeyError, TypeError) as e:
        if number == last:
          self.torn_lines += 1
          continue
        raise CacheCorruptError(f"{shard}: line {number + 1} is not a cache record ({e}); "
                                f"remove the shard or the line to go on") from None
      self._index.setdefault(key, entry)

  def __len__(self) -> int:
    return len(self._index)

  def __contains__(self, key: str) -> bool:
    return key in self._index

  def get(self, key: str) -> CachedResponse | None:
    return self._index.get(key)

  def put(self, key: str, *, endpoint: str, model: str, text: str, prompt_tokens: int,
          completion_tokens: int, cost_usd: float, attempts: int, latency_s: float) -> None:
    """Record one answered call; written and flushed before returning, so a kill cannot lose it."""
    if key in self._index:
      return
    if self._fd is None:
      stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
      self.shard_path = self.directory / f"{stamp}-{os.getpid()}-{secrets.token_hex(4)}.jsonl"
      self._fd = os.open(self.shard_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    # Formatted by hand (same JSON as json.dumps, ASCII-escaped strings, repr floats) because this runs
    # once per paid call on the client's hot path; one unbuffered os.write per record is the "flush".
    if not math.isfinite(cost_usd):
      raise ValueError(f"cost_usd must be finite, got {cost_usd!r}")
    line = (f'{{"key":{_quote(key)},"endpoint":{_quote(endpoint)},"model":{_quote(model)},'
            f'"text":{_quote(text)},'
            f'"prompt_tokens":{int(prompt_tokens)},"completion_tokens":{int(completion_tokens)},'
            f'"cost_usd":{float(cost_usd)!r},"attempts":{int(attempts)},"latency_s":{float(latency_s)!r}}}\n')
    data = line.encode("ascii")
    while data:  # a regular file takes it in one write; loop in case the OS says otherwise
      data = data[os.write(self._fd, data):]
    self._index[key] = CachedResponse(text, model, prompt_tokens, completion_tokens, cost_usd, attempts)

  def close(self) -> None:
    if self._fd is not None:
      os.close(self._fd)
      self._fd = None

  def __enter__(self) -> ResponseCache:
    return self

  def __exit__(self, *exc) -> None:
    self.close()

  def __repr__(self) -> str:
    return f"ResponseCache({str(self.directory)!r}, entries={len(self._index)})"
