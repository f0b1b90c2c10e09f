"""Metric writers behind one interface (console, JSONL, W&B), after CLU's `metric_writers`.

The JSONL file in the run directory is the record tables are rebuilt from; W&B is a mirror for
browsing. Its mode comes from `WANDB_MODE` when the user set it ("online", "offline", "disabled");
otherwise a `WANDB_API_KEY` means online and no key means offline, so nothing ever needs a server and
nothing forces offline on a user who chose online. `make wandb-sync` uploads offline runs later.

Every writer takes scalars (curves), a summary, tables (rows of per-query results) and artifacts
(files: results, chosen graphs, checkpoints); a writer that has no use for one ignores it, so
writers compose freely in a `MultiWriter`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import pathlib
import secrets
import threading
from typing import Any, Mapping, Protocol, Sequence

from hieramas_jax.experiment.provenance import redact

log = logging.getLogger(__name__)

PROJECT = "hieramas-jax"
WANDB_MODES = ("online", "offline", "disabled")
# Every W&B SDK call of this process holds this lock. The runner writes cells' runs from worker threads
# (`asyncio.to_thread`), and the SDK's process-wide state is not thread-safe: two artifacts made at once
# raced in its artifact cache (wandb 0.31 `CappedDict._prune_dict`: a KeyError that ended a Table 1 run
# after 13 minutes). Offline writes are short, so serialising them costs little. The first import too
# (`import_wandb`).
_WANDB_LOCK = threading.RLock()


class MetricWriter(Protocol):
  def write_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
    ...

  def write_summary(self, summary: Mapping[str, Any]) -> None:
    ...

  def write_table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    ...

  def write_artifact(self, name: str, kind: str, paths: Sequence[str | os.PathLike]) -> None:
    ...

  def close(self) -> None:
    ...


class NullWriter:
  """Accepts everything and keeps nothing: the base of writers that use only some of the interface."""

  def write_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
    pass

  def write_summary(self, summary: Mapping[str, Any]) -> None:
    pass

  def write_table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    pass

  def write_artifact(self, name: str, kind: str, paths: Sequence[str | os.PathLike]) -> None:
    pass

  def close(self) -> None:
    pass


class ConsoleWriter(NullWriter):
  """Logs summaries (not every step: the progress bar shows those) through `logging`."""

  def __init__(self, prefix: str = ""):
    self.prefix = prefix

  def write_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
    log.debug("%s step %d %s", self.prefix, step, dict(scalars))

  def write_summary(self, summary: Mapping[str, Any]) -> None:
    shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in summary.items())
    log.info("%s%s", f"{self.prefix}: " if self.prefix else "", shown)


class JsonlWriter(NullWriter):
  """Appends `{"step": s, ...}` lines to metrics.jsonl and the summary to summary.json.

  Tables and artifacts are already files of the run directory (items.jsonl, state/), so they are not
  copied again.
  """

  def __init__(self, run_dir: str | os.PathLike):
    self.run_dir = pathlib.Path(run_dir)
    self.run_dir.mkdir(parents=True, exist_ok=True)
    self._f = open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8")

  def write_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
    self._f.write(json.dumps({"step": step, **{k: _finite(v) for k, v in scalars.items()}}) + "\n")
    self._f.flush()

  def write_summary(self, summary: Mapping[str, Any]) -> None:
    from hieramas_jax.fileio import atomic_write_json  # pylint: disable=import-outside-toplevel
    atomic_write_json(self.run_dir / "summary.json", {k: _finite(v) for k, v in summary.items()})

  def close(self) -> None:
    self._f.close()


def import_wandb():
  """The W&B SDK module, imported on this thread under `_WANDB_LOCK` (every writer gets it here).

  Why: the runner opens cells' W&B runs from worker threads, so the SDK's first import could run while other
  threads compile or parse code; CPython 3.11's AST state is shared between threads (its recursion-depth
  check, CPython gh-106905), and pydantic parsing the SDK's class docstrings then raised "SystemError: AST
  constructor recursion depth mismatch", leaving a half-imported module for every other cell: all 72 Table 1
  cells failed. Importing once before the cells start removes the race.
  """
  with _WANDB_LOCK:
    import wandb  # pylint: disable=import-outside-toplevel  (slow import; only when used)
    _list_packages_once(wandb)
  return wandb


_sdk_working_set = None  # the SDK's own package reader, before `_list_packages_once` wrapped it


def _list_packages_once(wandb) -> None:
  """Every W&B run records the installed packages (its requirements.txt); the SDK reads every package's
  metadata again at each `wandb.init`, which was 73% of opening a run and ~17 s of the runner's one busy
  core over Table 1's 114 runs (issue 29's profile). Packages do not change while the suite runs, so the
  list is read once per process and every run records the same one. An SDK without that reader (another
  version) is left as it is: the runs are written either way."""
  util = getattr(wandb, "util", None)
  if not callable(getattr(util, "working_set", None)) or getattr(util.working_set, "_hieramas_once", False):
    return
  global _sdk_working_set  # pylint: disable=global-statement
  read = _sdk_working_set = util.working_set
  packages: list = []

  def working_set():
    if not packages:
      packages.extend(read())
    return iter(packages)

  working_set._hieramas_once = True  # pylint: disable=protected-access
  util.working_set = working_set


def wandb_mode(explicit: str | None = None) -> str:
  """The W&B mode: `explicit`, else WANDB_MODE, else online with WANDB_API_KEY, else offline."""
  mode = explicit or os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
  if mode not in WANDB_MODES:
    raise ValueError(f"WANDB_MODE={mode!r} is not one of {', '.join(WANDB_MODES)}")
  return mode


def wandb_group(default: str) -> str:
  """The W&B group: WANDB_RUN_GROUP when the user set one (W&B's own variable), else `default`."""
  return os.environ.get("WANDB_RUN_GROUP") or default


def stable_run_id(*parts: str) -> str:
  """A W&B run id that is the same on every run of the same cell (W&B ids: letters and digits, <= 64)."""
  return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


def artifact_name(text: str) -> str:
  """W&B artifact names allow letters, digits, '-', '_' and '.' only."""
  return "".join(c if c.isalnum() or c in "-_." else "-" for c in text).strip("-")[:120]


class WandbWriter(NullWriter):
  """One W&B run; mode from `wandb_mode` (offline by default, no network needed).

  Args:
    run_dir: the W&B files go under it (`<run_dir>/wandb/offline-run-*`).
    config: the run's flags; secrets are redacted (nested ones too) before W&B sees them.
    project, name, group, job_type, tags: W&B naming (group = the reproduction, job_type = the method
      or the training stage).
    mode: overrides `wandb_mode()`.
    new_id: give the run an id of its own even inside a W&B sweep agent (whose WANDB_RUN_ID belongs to
      the one run that reports the sweep's metric); training-stage runs set it.
    run_id: the run's W&B id (`stable_run_id`): a killed and resumed cell resumes the same run
      (`resume="allow"`), a rerun adds to it instead of making a duplicate. Inside a sweep agent
      (WANDB_SWEEP_ID set) the agent's own run id wins unless `new_id`.
  """

  def __init__(self, run_dir: str | os.PathLike, config: Mapping[str, Any], *, project: str = PROJECT,
               name: str | None = None, group: str | None = None, job_type: str | None = None,
               tags: Sequence[str] = (), mode: str | None = None, new_id: bool = False, run_id: str | None = None):
    self._wandb = import_wandb()
    self._tables: dict[str, tuple[list[str], list[list[Any]]]] = {}  # `log_rows`: columns, rows so far
    pathlib.Path(run_dir).mkdir(parents=True, exist_ok=True)
    extra: dict[str, Any] = {}
    if run_id is not None and (new_id or not os.environ.get("WANDB_SWEEP_ID")):
      extra = {"id": run_id, "resume": "allow"}
    elif new_id:
      extra = {"id": secrets.token_hex(4)}
    with _WANDB_LOCK:
      self._run = self._wandb.init(project=os.environ.get("WANDB_PROJECT") or project, name=name, group=group,
                                   job_type=job_type, tags=[t for t in tags if t] or None, mode=wandb_mode(mode),
                                   dir=str(run_dir), config=redact(json.loads(json.dumps(dict(config), default=str))),
                                   reinit="create_new", **extra)

  @property
  def run(self):
    return self._run

  def define_step(self, prefix: str, step_metric: str) -> None:
    """Plots `<prefix>/*` against `step_metric` (its own x-axis) instead of the run's global step."""
    with _WANDB_LOCK:
      self._run.define_metric(step_metric)
      self._run.define_metric(f"{prefix}/*", step_metric=step_metric)

  def log_rows(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Adds rows to the run's table `name`, logged once, as one table, when the run closes.

    Why not an incremental W&B table: each increment is an artifact version of its own (a manifest, a
    staged copy, a file to sync), about 20 KB a query: the full Table 1 made 9,696 increment files and
    403 MB to sync for tables of a few MB. The streaming view of a cell is its running curves (history);
    the table comes once per run, also from a killed run (closed in the runner's `finally`).
    """
    with _WANDB_LOCK:
      self._tables.setdefault(name, (list(columns), []))[1].extend(list(r) for r in rows)

  def write_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
    with _WANDB_LOCK:
      self._run.log({k: _finite(v) for k, v in scalars.items()}, step=step)

  def write_summary(self, summary: Mapping[str, Any]) -> None:
    with _WANDB_LOCK:
      for k, v in summary.items():
        self._run.summary[k] = _finite(v)

  def write_table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    with _WANDB_LOCK:
      self._run.log({name: self._wandb.Table(columns=list(columns), data=[list(r) for r in rows])})

  def write_artifact(self, name: str, kind: str, paths: Sequence[str | os.PathLike]) -> None:
    """Logs the existing files and directories among `paths` as one artifact (missing ones are skipped)."""
    present = [pathlib.Path(p) for p in paths if pathlib.Path(p).exists()]
    if not present:
      return
    with _WANDB_LOCK:
      artifact = self._wandb.Artifact(artifact_name(name), type=kind)
      for p in present:
        if p.is_dir():
          artifact.add_dir(str(p), name=p.name)
        else:
          artifact.add_file(str(p), name=p.name)
      self._run.log_artifact(artifact)

  def close(self) -> None:
    with _WANDB_LOCK:
      tables, self._tables = self._tables, {}
    for name, (columns, rows) in tables.items():
      self.write_table(name, columns, rows)
    with _WANDB_LOCK:
      self._run.finish()


class StageWandbWriters(NullWriter):
  """One W&B run per training stage, opened on the stage's first scalar.

  A fit logs `stage1/...` and `stage2/...` (HieraMAS) or `<method>/...` (the learned baselines); each
  prefix gets its own run named `<name>/<stage>` with job_type `<method>:<stage>` (`<method>:fit` for a
  baseline's one stage). A resumed fit opens the runs again for the steps it still trains; a loaded fit
  opens none. The summary and artifacts (checkpoints) go to every stage run opened so far.
  """

  def __init__(self, run_dir: str | os.PathLike, config: Mapping[str, Any], *, method: str, name: str,
               group: str | None, tags: Sequence[str] = (), mode: str | None = None, job_type: str | None = None,
               run_id: str | None = None):
    self.run_dir, self.config, self.method, self.name = pathlib.Path(run_dir), dict(config), method, name
    self.group, self.tags, self.mode = group, tuple(tags), mode
    self.job_type, self.run_id = job_type or method, run_id
    self.runs: dict[str, WandbWriter] = {}

  def _stage(self, key: str) -> str:
    prefix = key.partition("/")[0] if "/" in key else "fit"
    return "fit" if prefix == self.method else prefix

  def _run_for(self, stage: str) -> WandbWriter:
    if stage not in self.runs:
      run = WandbWriter(self.run_dir, {**self.config, "stage": stage}, name=f"{self.name}/{stage}",
                        group=self.group, job_type=f"{self.job_type}:{stage}", tags=self.tags, mode=self.mode,
                        new_id=True, run_id=f"{self.run_id}-{stage}" if self.run_id else None)
      if stage == "stage2":  # stage 2 on its own axis (epochs), not continuing stage 1's steps
        run.define_step("stage2", "stage2/epoch")
      self.runs[stage] = run
    return self.runs[stage]

  def write_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
    by_stage: dict[str, dict[str, float]] = {}
    for k, v in scalars.items():
      by_stage.setdefault(self._stage(k), {})[k] = v
    for stage, values in by_stage.items():
      run = self._run_for(stage)
      if stage == "stage2":
        run.write_scalars(step, {**values, "stage2/epoch": step - self.config.get("stage1_steps", 0)})
      else:
        run.write_scalars(step, values)

  def write_summary(self, summary: Mapping[str, Any]) -> None:
    for run in self.runs.values():
      run.write_summary(summary)

  def write_artifact(self, name: str, kind: str, paths: Sequence[str | os.PathLike]) -> None:
    if self.runs:
      list(self.runs.values())[-1].write_artifact(name, kind, paths)

  def close(self) -> None:
    for run in self.runs.values():
      run.close()
    self.runs.clear()


class MultiWriter(NullWriter):
  """Fans every call out to several writers."""

  def __init__(self, writers: Sequence[MetricWriter]):
    self.writers = list(writers)

  def write_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
    for w in self.writers:
      w.write_scalars(step, scalars)

  def write_summary(self, summary: Mapping[str, Any]) -> None:
    for w in self.writers:
      w.write_summary(summary)

  def write_table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    for w in self.writers:
      w.write_table(name, columns, rows)

  def write_artifact(self, name: str, kind: str, paths: Sequence[str | os.PathLike]) -> None:
    for w in self.writers:
      w.write_artifact(name, kind, paths)

  def close(self) -> None:
    for w in self.writers:
      w.close()


def make_writers(run_dir: str | os.PathLike, config: Mapping[str, Any], *, use_wandb: bool,
                 name: str | None = None, group: str | None = None, job_type: str | None = None) -> MultiWriter:
  """Console + JSONL always; W&B when `use_wandb`."""
  writers: list[MetricWriter] = [ConsoleWriter(name or ""), JsonlWriter(run_dir)]
  if use_wandb:
    writers.append(WandbWriter(run_dir, config, name=name, group=group, job_type=job_type))
  return MultiWriter(writers)


def scalar_leaves(record: Mapping[str, Any], prefix: str = "", limit: int = 500) -> dict[str, float]:
  """The numeric leaves of a nested record as `a/b/c` keys (a W&B summary of a results file)."""
  out: dict[str, float] = {}

  def walk(value, key):
    if len(out) >= limit:
      return
    if isinstance(value, bool):
      out[key] = float(value)
    elif isinstance(value, (int, float)):
      out[key] = _finite(float(value))
    elif isinstance(value, Mapping):
      for k, v in value.items():
        if k != "provenance":
          walk(v, f"{key}/{k}" if key else str(k))

  walk(record, prefix)
  return out


def log_result_run(result_file: str | os.PathLike, record: Mapping[str, Any], *, job_type: str, name: str,
                   group: str, config: Mapping[str, Any] | None = None, extra_files: Sequence[str | os.PathLike] = (),
                   run_dir: str | os.PathLike | None = None) -> None:
  """One W&B run for a script's results (calibration, oracle, a benchmark): config, summary, artifact.

  The summary is the record's numeric leaves; the artifact holds the results file (and `extra_files`).
  WANDB_MODE=disabled turns it off. The W&B files go under `runs/wandb/<job_type>/` unless `run_dir`.
  """
  from hieramas_jax.paths import REPO_DIR  # pylint: disable=import-outside-toplevel
  if wandb_mode() == "disabled":
    return
  config = dict(config if config is not None else (record.get("provenance") or {}).get("flags") or {})
  writer = WandbWriter(run_dir or REPO_DIR / "runs" / "wandb" / artifact_name(job_type), config, name=name,
                       group=wandb_group(group), job_type=job_type)
  try:
    writer.write_summary(scalar_leaves(record))
    writer.write_artifact(f"{job_type}-{name}", "results", [result_file, *extra_files])
  finally:
    writer.close()


def _finite(v: Any) -> Any:
  if isinstance(v, float) and not math.isfinite(v):
    return None
  return v
