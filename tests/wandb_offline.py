"""Reads offline W&B runs back from disk, so tests check what a run logged without a W&B server.

An offline run is `offline-run-*/run-<id>.wandb`: a LevelDB-style log (32 KiB blocks, 7-byte record
headers: crc32, length, type full/first/middle/last) of `wandb_internal_pb2.Record` protobufs after a
7-byte ":W&B" header. wandb 0.31 ships no Python reader for it, hence this one.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import struct
import time
from typing import Any, Iterator

BLOCK = 32768
HEADER = 7


def _chunks(data: bytes) -> Iterator[bytes]:
  if data[:4] != b":W&B":
    raise ValueError("not a W&B transaction log")
  pos, pending = HEADER, b""
  while pos + HEADER <= len(data):
    left = BLOCK - pos % BLOCK
    if left < HEADER:
      pos += left
      continue
    _, length, kind = struct.unpack("<IHB", data[pos:pos + HEADER])
    pos += HEADER
    chunk = data[pos:pos + length]
    pos += length
    if kind == 1:
      yield chunk
    elif kind == 2:
      pending = chunk
    elif kind == 3:
      pending += chunk
    elif kind == 4:
      yield pending + chunk


@dataclasses.dataclass
class OfflineRun:
  path: pathlib.Path
  id: str = ""
  name: str = ""
  group: str = ""
  job_type: str = ""
  tags: list[str] = dataclasses.field(default_factory=list)
  config: dict[str, Any] = dataclasses.field(default_factory=dict)
  summary: dict[str, Any] = dataclasses.field(default_factory=dict)
  history: list[dict[str, Any]] = dataclasses.field(default_factory=list)
  artifacts: list[dict[str, Any]] = dataclasses.field(default_factory=list)
  finished: bool = False

  @property
  def files(self) -> list[pathlib.Path]:
    return [p for p in (self.path / "files").rglob("*") if p.is_file()]


def _key(item) -> str:
  return "/".join(item.nested_key) if item.nested_key else item.key


def read_run(run_dir: pathlib.Path) -> OfflineRun:
  from wandb.proto import wandb_internal_pb2 as pb  # pylint: disable=import-outside-toplevel
  (log,) = run_dir.glob("run-*.wandb")
  run = OfflineRun(run_dir)
  for data in _chunks(log.read_bytes()):
    rec = pb.Record()
    rec.ParseFromString(data)
    kind = rec.WhichOneof("record_type")
    if kind == "run":
      r = rec.run
      run.name, run.group, run.job_type, run.tags = r.display_name, r.run_group, r.job_type, list(r.tags)
      run.id = r.run_id
      run.config.update({u.key: json.loads(u.value_json) for u in r.config.update if u.key != "_wandb"})
    elif kind == "config":
      run.config.update({u.key: json.loads(u.value_json) for u in rec.config.update if u.key != "_wandb"})
    elif kind == "summary":
      run.summary.update({_key(u): json.loads(u.value_json) for u in rec.summary.update})
    elif kind == "history":
      run.history.append({_key(i): json.loads(i.value_json) for i in rec.history.item})
    elif kind == "artifact":
      a = rec.artifact
      run.artifacts.append({"name": a.name, "type": a.type, "paths": [c.path for c in a.manifest.contents]})
    elif kind == "exit":
      run.finished = True
  return run


def offline_runs(root: pathlib.Path, wait_s: float = 60.0) -> list[OfflineRun]:
  """Every offline run under `root`, in creation order, once each has its exit record.

  `run.finish()` returns before W&B's service process has written the last records of the log, so the
  log is read again until every run is complete (or `wait_s` has passed: then as it stands).
  """
  deadline = time.monotonic() + wait_s
  while True:
    runs = [read_run(p) for p in sorted(pathlib.Path(root).rglob("offline-run-*")) if p.is_dir()]
    if all(r.finished for r in runs) or time.monotonic() > deadline:
      return runs
    time.sleep(0.2)
