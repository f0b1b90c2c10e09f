"""What stage 2's labels can see: solved-vs-unsolved against cost-only contrast, from finished HieraMAS cells.

  python experiments/stage2_labels.py --run_dirs=runs/table1/<root>/main/seed0/gpt-5-mini/math/hieramas

Reads each cell's stage-2 data (`state/stage2_data.npz`: the frozen policy's fixed configuration of every
training query run on its random graphs) and writes <out>.json / <out>.md (`report/learning.py`). No call
is made; the published labels are not changed.
"""

from __future__ import annotations

import pathlib

from absl import flags

from hieramas_jax.errors import UserError
from hieramas_jax.experiment import cli
from hieramas_jax.experiment.cli import selected_flags
from hieramas_jax.experiment.provenance import provenance
from hieramas_jax.fileio import atomic_write_json, atomic_write_text
from hieramas_jax.learn.evidence import label_sources
from hieramas_jax.methods.hieramas.training import load_stage2_data
from hieramas_jax.experiment.rundir import repo_relative
from hieramas_jax.paths import RESULTS_DIR
from hieramas_jax.report.learning import stage2_labels_markdown, stage2_labels_record

FLAGS = flags.FLAGS
flags.DEFINE_list("run_dirs", [], "HieraMAS cell run directories (each with state/stage2_data.npz).")
flags.DEFINE_string("out", str(RESULTS_DIR / "stage2_labels"), "Output path without extension.")
flags.DEFINE_string("backend", "sim", "The backend the cells ran on (provenance label).")


def main():
  if not FLAGS.run_dirs:
    raise UserError("--run_dirs is empty: name at least one HieraMAS cell run directory")
  cells = []
  for d in FLAGS.run_dirs:
    data = load_stage2_data(pathlib.Path(d) / "state")
    if data is None:
      raise UserError(f"--run_dirs: {d} holds no state/stage2_data.npz (not a finished HieraMAS fit)")
    cells.append({"run_dir": repo_relative(pathlib.Path(d)),
                  "label_sources": label_sources(data["solved"], data["reward"], data["adjacency"],
                                                 data["decision_cost"])})
  record = stage2_labels_record(cells, provenance(seed=None, flags=selected_flags(FLAGS, ("run_dirs", "out")),
                                                  backend=FLAGS.backend))
  atomic_write_json(f"{FLAGS.out}.json", record)
  atomic_write_text(f"{FLAGS.out}.md", stage2_labels_markdown(record))
  print(stage2_labels_markdown(record).split("\n## Provenance")[0])


if __name__ == "__main__":
  cli.run(main)
