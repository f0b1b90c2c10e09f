"""The held-out prompt suite: 30 prompts from other public codebases through the official openai client against
the served sim, each within a stated bound of what published evidence predicts (issue 28, item 4).

  python experiments/sim_heldout_prompts.py --n_items=60 --out_dir=/tmp/heldout     # ~2 min

Writes <out_dir>/sim_heldout_prompts.{json,md}; the prompts, their sources and bounds are in
hieramas_jax/experiment/heldout_prompts.py.
"""

from __future__ import annotations

import json
import pathlib

from absl import flags

from hieramas_jax.experiment import cli
from hieramas_jax.experiment.heldout_prompts import heldout_markdown, run_heldout_prompts
from hieramas_jax.experiment.provenance import provenance, sim_title
from hieramas_jax.fileio import atomic_write_text
from hieramas_jax.paths import RESULTS_DIR
from hieramas_jax.sim import params as P
from hieramas_jax.sim.calibration_targets import PAPER_COT
from hieramas_jax.sim.server import SimConfig, start_sim_in_thread

FLAGS = flags.FLAGS
flags.DEFINE_integer("seed", 0, "The sim's seed.")
flags.DEFINE_enum("model", "gpt-5-mini", list(PAPER_COT), "Model asked (one with published Base and CoT rows).")
flags.DEFINE_integer("n_items", 60, "Items per benchmark (the first of the file).", lower_bound=10)
flags.DEFINE_enum("profile", P.DEFAULT_PROFILE, list(P.PROFILES), "The sim's aggregation profile.")
flags.DEFINE_string("out_dir", str(RESULTS_DIR), "Where sim_heldout_prompts.json / .md are written.")


def main():
  names = ("seed", "model", "n_items", "profile", "out_dir")
  with start_sim_in_thread(SimConfig(seed=FLAGS.seed, profile=FLAGS.profile)) as sim:
    record = run_heldout_prompts(sim.base_url, model=FLAGS.model, n_items=FLAGS.n_items)
  record["provenance"] = provenance(seed=FLAGS.seed, benchmarks=("math", "mmlu_redux"), backend="sim",
                                    flags={**{n: FLAGS[n].value for n in names}, "sim_profile": FLAGS.profile})
  out = pathlib.Path(FLAGS.out_dir)
  out.mkdir(parents=True, exist_ok=True)
  atomic_write_text(out / "sim_heldout_prompts.json", json.dumps(record, indent=1) + "\n")
  atomic_write_text(out / "sim_heldout_prompts.md", heldout_markdown(record, sim_title(record)))
  print(f"wrote {out}/sim_heldout_prompts.md: {record['n_within']} of {len(record['rows'])} prompts within bounds")


if __name__ == "__main__":
  cli.run(main)
