"""Upload the offline W&B runs under runs/ (make wandb-sync): every cell, training stage and result run.

  python launch/wandb_sync.py                  # all unsynced offline runs under runs/ (WANDB_API_KEY set)
  python launch/wandb_sync.py --root=/tmp/runs --dry_run     # list them

Without WANDB_API_KEY: one clear error and exit 2 (nothing is uploaded). A run already uploaded (W&B
leaves `run-<id>.wandb.synced` beside its log) is skipped, so a second sync only uploads new runs.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

from absl import app, flags

REPO = pathlib.Path(__file__).resolve().parents[1]
_ROOT = flags.DEFINE_string("root", str(REPO / "runs"), "Where to look for offline-run-* directories.")
_DRY = flags.DEFINE_bool("dry_run", False, "Only list the runs that would be uploaded.")


def unsynced_runs(root: pathlib.Path) -> list[pathlib.Path]:
  runs = []
  for d in sorted(root.rglob("offline-run-*")):
    if d.is_dir() and not d.is_symlink():
      logs = list(d.glob("run-*.wandb"))
      if logs and not all(log.with_name(log.name + ".synced").exists() for log in logs):
        runs.append(d)
  return runs


def main(argv):
  del argv
  if not os.environ.get("WANDB_API_KEY"):
    print("error: WANDB_API_KEY is not set: export your W&B API key (https://wandb.ai/authorize) to upload the "
          "offline runs; nothing was uploaded", file=sys.stderr)
    sys.exit(2)
  root = pathlib.Path(_ROOT.value)
  runs = unsynced_runs(root) if root.exists() else []
  print(f"{len(runs)} offline W&B run(s) to upload under {root}")
  if _DRY.value or not runs:
    for r in runs:
      print(f"  {r}")
    return
  wandb = shutil.which("wandb", path=str(pathlib.Path(sys.executable).parent)) or shutil.which("wandb")
  if wandb is None:
    print("error: the `wandb` command is not installed (make install)", file=sys.stderr)
    sys.exit(2)
  # In batches: a reproduction holds a few hundred runs, more than one command line should carry.
  for start in range(0, len(runs), 50):
    rc = subprocess.run([wandb, "sync", *map(str, runs[start:start + 50])], check=False).returncode
    if rc != 0:
      print(f"error: wandb sync failed (exit code {rc}); rerun to resume (synced runs are skipped)", file=sys.stderr)
      sys.exit(rc)


if __name__ == "__main__":
  app.run(main)
