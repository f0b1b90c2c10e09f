"""Run directories: one config.json each, and a refusal to mix results of different configurations or data.

A run directory is resumed only when its config.json describes exactly the run asked for. The data
fingerprint (sha256 of the benchmark's vendored file and of the split file) is checked first, so an
edited data file is named in the error instead of hiding among other differences.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import pathlib
from typing import Any, Iterator, Mapping

from hieramas_jax.benchmarks.data import DataError
from hieramas_jax.errors import UserError
from hieramas_jax.fileio import atomic_write_text
from hieramas_jax.paths import REPO_DIR

DATA_KEY = "data"

# A cell's run directory (`runner.cell_dir`): what each file holds is said where it is written.
FIT_FILE = "fit.json"
STATE_DIR = "state"
UNTRAINED_DIR = "untrained"  # the untrained check's items.jsonl and traces (runner._untrained_check)
TRAINING_COST_FILE = "training_cost.json"
SUMMARY_FILE = "summary.json"
PROGRESS_FILE = "progress.json"
CHOSEN_FILE = "chosen_graphs.json"
# The commits whose code computed a cell's fit or test results (a rerun that only replays adds none).
COMPUTED_FILE = "computed_by.json"
# Held (flock) by the one process writing the cell; holds that process's pid and host.
LOCK_FILE = ".lock"


class StateError(DataError):
  """A run-directory or cache file is damaged or edited: one line naming the file and the fix (exit 2)."""


def read_json(path: str | os.PathLike, fix: str) -> Any:
  """The JSON in `path`, or a StateError naming the file and `fix` (never a bare traceback)."""
  path = pathlib.Path(path)
  try:
    return json.loads(path.read_text(encoding="utf-8"))
  except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
    raise StateError(f"{path}: not readable JSON ({type(e).__name__}: {str(e)[:200]}); {fix}") from e


def _record_digest(record: Mapping[str, Any]) -> str:
  body = json.dumps({k: v for k, v in record.items() if k != "sha256"}, sort_keys=True, separators=(",", ":"))
  return hashlib.sha256(body.encode()).hexdigest()


def sealed_line(record: Mapping[str, Any]) -> str:
  """One JSONL line holding `record` and the sha256 of its canonical JSON (so an edit is detected)."""
  return json.dumps({**record, "sha256": _record_digest(record)}) + "\n"


def read_sealed_lines(path: str | os.PathLike, fix: str) -> tuple[list[dict[str, Any]], bool]:
  """The records of a JSONL file written with `sealed_line`, and whether a torn last line was dropped.

  Only the last line can be torn by a kill mid-write (it is then dropped and the file rewritten
  without it, so the next append starts clean). A bad line anywhere else, or a record whose checksum
  does not match (edited by hand or by a program), is a StateError naming the file, line and `fix`.
  """
  path = pathlib.Path(path)
  try:
    lines = path.read_text(encoding="utf-8").splitlines()
  except UnicodeDecodeError as e:
    raise StateError(f"{path}: not UTF-8 text ({e}); {fix}") from e
  numbered = [(i + 1, line) for i, line in enumerate(lines) if line.strip()]
  records: list[dict[str, Any]] = []
  kept: list[str] = []
  torn = False
  for n, (lineno, line) in enumerate(numbered):
    try:
      record = json.loads(line)
    except (ValueError, RecursionError):
      if n == len(numbered) - 1 and not path.read_bytes().endswith(b"\n"):
        torn = True  # a kill mid-append: only ever the unterminated last line
        break
      raise StateError(f"{path}:{lineno}: not a JSON record (a torn line can only be the last); {fix}") from None
    if not isinstance(record, dict) or record.get("sha256") != _record_digest(record):
      raise StateError(f"{path}:{lineno}: the record's checksum does not match (edited after it was written); "
                       f"{fix}")
    records.append(record)
    kept.append(line)
  if torn:
    atomic_write_text(path, "".join(line + "\n" for line in kept))
  return records, torn


class RunConfigMismatchError(UserError, ValueError):
  """A run directory holds results of a different configuration: refuse to mix them."""


class DataChangedError(RunConfigMismatchError):
  """A data file changed since the run directory was started: resuming would mix two datasets."""


def repo_relative(path: str | os.PathLike) -> str:
  """`path` relative to the repository when it is inside it, else as given (no machine paths in results)."""
  p = pathlib.Path(path)
  try:
    return p.resolve().relative_to(REPO_DIR.resolve()).as_posix()
  except ValueError:
    return p.as_posix()


def from_repo(path: str | os.PathLike) -> pathlib.Path:
  """The inverse of `repo_relative`: a relative path is taken from the repository root."""
  p = pathlib.Path(path)
  return p if p.is_absolute() else REPO_DIR / p


def run_dir_conflict(run_dir: str | os.PathLike, config: Mapping[str, Any]) -> ValueError | None:
  """Why `run_dir` cannot hold a run of `config` (None: it is new or ran the same config). Writes nothing.

  `runner.check_plans` calls this for every cell before any of them starts, so that every conflict is reported
  at once instead of one by one, late, after the other cells have run.
  """
  run_dir = pathlib.Path(run_dir)
  path = run_dir / "config.json"
  if not path.exists():
    return None
  wanted = json.loads(json.dumps(config))
  try:
    old = read_json(path, f"delete {repo_relative(run_dir)} (or use another --run_root) and rerun")
  except StateError as e:
    return e
  if old == wanted:
    return None
  if DATA_KEY in wanted and isinstance(old, dict) and old.get(DATA_KEY) != wanted[DATA_KEY]:
    return DataChangedError(f"{repo_relative(run_dir)}: {_data_difference(old.get(DATA_KEY), wanted[DATA_KEY])}; "
                            "its results were made on other data, so it cannot be resumed: delete it or use "
                            "another --run_root")
  old = old if isinstance(old, dict) else {}
  diff = config_differences(old, wanted)
  more = len(diff) - MAX_DIFFERENCES
  shown = "; ".join(diff[:MAX_DIFFERENCES]) + (f"; {more} more" if more > 0 else "")
  return RunConfigMismatchError(f"{repo_relative(run_dir)} holds a run with another configuration "
                                f"(differs in: {shown}); use another --run_root or delete it")


# Differences a refusal names (the rest counted): enough to act on, short enough for one line.
MAX_DIFFERENCES = 4


def config_differences(old: Any, new: Any, path: str = "") -> list[str]:
  """Every leaf where two config.json contents differ, as `field.sub: recorded X, this run Y`.

  Why leaves: "differs in: method_config" left the researcher to diff two JSON files; the field and both
  values say which flag to change (or which --run_root to pick).
  """
  if isinstance(old, dict) and isinstance(new, dict):
    return [d for k in sorted(set(old) | set(new), key=str)
            for d in config_differences(old.get(k, _ABSENT), new.get(k, _ABSENT), f"{path}.{k}" if path else str(k))]
  if old == new:
    return []
  return [f"{path or 'config'}: recorded {_short(old)}, this run {_short(new)}"]


_ABSENT = object()


def _short(value: Any, limit: int = 40) -> str:
  if value is _ABSENT:
    return "(absent)"
  text = json.dumps(value, sort_keys=True, default=str)
  return text if len(text) <= limit else text[:limit - 1] + "…"


def prepare_run_dir(run_dir: str | os.PathLike, config: Mapping[str, Any]) -> pathlib.Path:
  """Creates a run directory with config.json, or checks that an existing one ran the same config.

  Raises:
    DataChangedError: config["data"] (file hashes) differs from the recorded one.
    RunConfigMismatchError: anything else differs.
  """
  run_dir = pathlib.Path(run_dir)
  conflict = run_dir_conflict(run_dir, config)
  if conflict is not None:
    raise conflict
  path = run_dir / "config.json"
  if not path.exists():
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(json.loads(json.dumps(config)), indent=2) + "\n")
  return run_dir


class RunDirLockedError(UserError, RuntimeError):
  """Another process is writing the run directory: two writers would tear its checkpoints and append the
  same items twice."""


@contextlib.contextmanager
def run_dir_lock(run_dir: str | os.PathLike) -> Iterator[pathlib.Path]:
  """Holds `<run_dir>/.lock` (an exclusive, non-blocking flock) while the cell is written: one writer per cell.

  Why: four processes fitting one cell once crashed orbax twice and appended duplicate item ids. The
  lock is released by the kernel when its holder exits, however it exits (a kill included), so a stale
  file never blocks a resume. On a shared filesystem the lock holds where the filesystem honours flock
  (NFSv4, Lustre, CephFS do; see README).

  Raises:
    RunDirLockedError: another process holds it (its pid and host named).
  """
  run_dir = pathlib.Path(run_dir)
  run_dir.mkdir(parents=True, exist_ok=True)
  path = run_dir / LOCK_FILE
  fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      if e.errno not in (errno.EWOULDBLOCK, errno.EACCES, errno.EAGAIN):
        raise
      holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "unknown"
      raise RunDirLockedError(f"{repo_relative(run_dir)} is being written by another process ({holder}); wait "
                              "for it to finish or stop it, or use another --run_root") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {os.uname().nodename}".encode(), 0)
    yield path
  finally:
    os.close(fd)  # releases the flock


def _data_difference(old: Any, new: Mapping[str, Any]) -> str:
  if not isinstance(old, Mapping):
    return "it records no data hashes"
  changed = [f"{new.get(k + '_file', k)} changed (sha256 {str(old.get(k))[:12]} -> {str(new[k])[:12]})"
             for k in sorted(new) if not k.endswith("_file") and old.get(k) != new[k]]
  return "; ".join(changed) or "its data record differs"


def safe_name(name: str, sep: str = "-") -> str:
  """`name` as one path component: every character other than a letter, digit, '-', '_' or '.' becomes `sep`.

  The suite's one sanitiser: endpoint names as run roots ("sim:seed0:ab12" -> "sim-seed0-ab12"), a
  sweep point's --run_name as its cell's tag ("k/k_pool=50" -> "k_k_pool_50" with sep="_"), cell keys
  as page anchors. One character in, one out: names already on disk keep their spelling.
  """
  return "".join(c if c.isalnum() or c in "-_." else sep for c in name)
