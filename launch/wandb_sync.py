"""Upload the offline W&B runs under runs/ (make wandb-sync): every cell, training stage and result run.

  python launch/wandb_sync.py                  # all unsynced offline runs under runs/ (after `wandb login`)
  python launch/wandb_sync.py --root=/tmp/runs --dry_run     # list them

The key is W&B's own: WANDB_API_KEY, or the one `wandb login` wrote to ~/.netrc (or $NETRC). Without
either: one clear error and exit 2 (nothing is uploaded); `--dry_run` needs no key. A run already
uploaded (W&B leaves `run-<id>.wandb.synced` beside its log) is skipped, so a second sync only uploads new
runs.
"""

from __future__ import annotations

import netrc
import os
import pathlib
import shutil
import subprocess
import sys
import urllib.parse

from absl import flags

from hieramas_jax.errors import UserError
from hieramas_jax.experiment import cli

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


def has_wandb_key() -> bool:
  """Whether W&B has a key: WANDB_API_KEY, or `wandb login`'s entry for the W&B host in ~/.netrc ($NETRC)."""
  if os.environ.get("WANDB_API_KEY"):
    return True
  host = urllib.parse.urlparse(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname or ""
  path = pathlib.Path(os.environ.get("NETRC") or pathlib.Path.home() / ".netrc")
  try:
    entry = netrc.netrc(str(path)).authenticators(host)
  except (OSError, netrc.NetrcParseError):
    return False
  return bool(entry and entry[2])


def main():
  root = pathlib.Path(_ROOT.value)
  runs = unsynced_runs(root) if root.exists() else []
  if not _DRY.value and not has_wandb_key():
    raise UserError("no W&B key: run `wandb login` (or export WANDB_API_KEY, https://wandb.ai/authorize) to upload "
                    f"the {len(runs)} offline run(s); nothing was uploaded (--dry_run lists them without a key)")
  print(f"{len(runs)} offline W&B run(s) to upload under {root}")
  if _DRY.value or not runs:
    for r in runs:
      print(f"  {r}")
    return
  wandb = shutil.which("wandb", path=str(pathlib.Path(sys.executable).parent)) or shutil.which("wandb")
  if wandb is None:
    raise UserError("the `wandb` command is not installed (make install)")
  # In batches: a reproduction holds a few hundred runs, more than one command line should carry.
  for start in range(0, len(runs), 50):
    rc = subprocess.run([wandb, "sync", *map(str, runs[start:start + 50])], check=False).returncode
    if rc != 0:
      print(f"error: wandb sync failed (exit code {rc}); rerun to resume (synced runs are skipped)", file=sys.stderr)
      sys.exit(rc)


if __name__ == "__main__":
  cli.run(main)
