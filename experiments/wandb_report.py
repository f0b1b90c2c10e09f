"""The offline report's views as a W&B report, built from the runs (wandb-workspaces).

  python experiments/wandb_report.py --entity=ME --project=hieramas-jax            # show what it holds
  python experiments/wandb_report.py --entity=ME --project=hieramas-jax --save     # publish (W&B login)

Upload the offline runs first (`make wandb-sync`); `--group` restricts it to one reproduction.
"""

from __future__ import annotations

import json
import os

from absl import flags

from hieramas_jax.errors import UserError
from hieramas_jax.experiment import cli
from hieramas_jax.experiment.writers import PROJECT
from hieramas_jax.report.wandb_report import build_report, describe

FLAGS = flags.FLAGS
flags.DEFINE_string("entity", os.environ.get("WANDB_ENTITY"), "W&B entity (user or team) of the runs.")
flags.DEFINE_string("project", os.environ.get("WANDB_PROJECT", PROJECT), "W&B project of the runs.")
flags.DEFINE_string("group", None, "Only this reproduction (W&B group), e.g. table1/sim-seed0-8de37b2e697a.")
flags.DEFINE_bool("save", False, "Publish the report to the W&B server (needs WANDB_API_KEY or wandb login).")


def main():
  if not FLAGS.entity:
    raise UserError("--entity (or WANDB_ENTITY) is required: the W&B user or team that holds the runs")
  report = build_report(FLAGS.entity, FLAGS.project, group=FLAGS.group)
  print(json.dumps(describe(report), indent=1))
  if FLAGS.save:
    if not (os.environ.get("WANDB_API_KEY") or os.path.exists(os.path.expanduser("~/.netrc"))):
      raise UserError("--save needs a W&B login: set WANDB_API_KEY or run `wandb login`")
    report.save()
    print(f"saved: {report.url}")


if __name__ == "__main__":
  cli.run(main)
