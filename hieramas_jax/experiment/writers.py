"""Metric writers behind one interface (console, JSONL, W&B), after CLU's `metric_writers`.

The JSONL file in the run directory is the record tables are rebuilt from; W&B is a mirror for
browsing, offline by default (`WANDB_MODE`, else "offline") and skippable (`--wandb=false`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import pathlib
from typing import Any, Mapping, Protocol, Sequence

from hieramas_jax.experiment.provenance import redact

log = logging.getLogger(__name__)


class MetricWriter(Protocol):
  def write_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
    ...

  def write_summary(self, summary: Mapping[str, Any]) -> None:
    ...

  def close(self) -> None:
    ...


class ConsoleWriter:
  """Logs summaries (not every step: the progress bar shows those) through `logging`."""

  def __init__(self, prefix: str = ""):
    self.prefix = prefix

  def write_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
    log.debug("%s step %d %s", self.prefix, step, dict(scalars))

  def write_summary(self, summary: Mapping[str, Any]) -> None:
    shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in summary.items())
    log.info("%s%s", f"{self.prefix}: " if self.prefix else "", shown)

  def close(self) -> None:
    pass


class JsonlWriter:
  """Appends `{"step": s, ...}` lines to metrics.jsonl and the summary to summary.json."""

  def __init__(self, run_dir: str | os.PathLike):
    self.run_dir = pathlib.Path(run_dir)
    self.run_dir.mkdir(parents=True, exist_ok=True)
    self._f = open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8")

  def write_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
    self._f.write(json.dumps({"step": step, **{k: _finite(v) for k, v in scalars.items()}}) + "\n")
    self._f.flush()

  def write_summary(self, summary: Mapping[str, Any]) -> None:
    from hieramas_jax.experiment.provenance import atomic_write_json  # pylint: disable=import-outside-toplevel
    atomic_write_json(self.run_dir / "summary.json", {k: _finite(v) for k, v in summary.items()})

  def close(self) -> None:
    self._f.close()


class WandbWriter:
  """A W&B run mirroring the scalars; mode from WANDB_MODE, default "offline" (no network needed).

  Args:
    run_dir: the W&B files go under it.
    config: the run's flags; secrets are redacted before W&B sees them.
    project, name, group: W&B naming.
    mode: overrides WANDB_MODE.
  """

  def __init__(self, run_dir: str | os.PathLike, config: Mapping[str, Any], *, project: str = "hieramas-jax",
               name: str | None = None, group: str | None = None, mode: str | None = None):
    import wandb  # pylint: disable=import-outside-toplevel  (slow import; only when used)
    self._wandb = wandb
    mode = mode or os.environ.get("WANDB_MODE") or "offline"
    self._run = wandb.init(project=project, name=name, group=group, mode=mode, dir=str(run_dir),
                           config=redact(dict(config)), reinit="create_new")

  def write_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
    self._run.log(dict(scalars), step=step)

  def write_summary(self, summary: Mapping[str, Any]) -> None:
    for k, v in summary.items():
      self._run.summary[k] = v

  def close(self) -> None:
    self._run.finish()


class MultiWriter:
  """Fans every call out to several writers."""

  def __init__(self, writers: Sequence[MetricWriter]):
    self.writers = list(writers)

  def write_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
    for w in self.writers:
      w.write_scalars(step, scalars)

  def write_summary(self, summary: Mapping[str, Any]) -> None:
    for w in self.writers:
      w.write_summary(summary)

  def close(self) -> None:
    for w in self.writers:
      w.close()


def make_writers(run_dir: str | os.PathLike, config: Mapping[str, Any], *, use_wandb: bool,
                 name: str | None = None, group: str | None = None) -> MultiWriter:
  """Console + JSONL always; W&B when `use_wandb`."""
  writers: list[MetricWriter] = [ConsoleWriter(name or ""), JsonlWriter(run_dir)]
  if use_wandb:
    writers.append(WandbWriter(run_dir, config, name=name, group=group))
  return MultiWriter(writers)


def _finite(v: Any) -> Any:
  if isinstance(v, float) and not math.isfinite(v):
    return None
  return v
