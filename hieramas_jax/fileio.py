"""Atomic file writes, shared by every layer (results, caches, the sandbox's expected outputs).

Lives at the bottom of the package so that `benchmarks/` can use it without importing `experiment/`.
"""

from __future__ import annotations

import json
import os
import pathlib
import tempfile
from typing import Any


def _read_umask() -> int:
  mask = os.umask(0o022)  # the only way to read it is to set it; restored at once (at import, one thread)
  os.umask(mask)
  return mask


_UMASK = _read_umask()


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
  """Write via a temp file in the same directory + rename: readers see the old file or the new one,
  never a half-written one, and a killed writer leaves no partial file behind."""
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
  try:
    # mkstemp creates 0600; the file gets the mode any new file gets here (0644 under the usual umask).
    os.fchmod(fd, 0o666 & ~_UMASK)
    with os.fdopen(fd, "wb") as f:
      f.write(data)
    os.replace(tmp, path)
  except BaseException:
    pathlib.Path(tmp).unlink(missing_ok=True)
    raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
  atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
  atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")
