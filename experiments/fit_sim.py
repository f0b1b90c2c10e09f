"""Fit the simulated pool's collaboration parameters on the paper's published rows (in-process).

  python experiments/fit_sim.py        # writes hieramas_jax/data/sim/collaboration_fit.json

Fits, in order: the shared wrong-answer spread per benchmark (to the error-coincidence targets),
RHO_TAU (Self-Consistency and SC+CoT rows), RECOGNITION_MAX (LLM-Debate row); see
hieramas_jax/experiment/sim_fit.py. The chosen values must then be copied into
hieramas_jax/sim/params.py (a test checks they agree) and verified through the real pipeline with
`make calibrate`.
"""

from __future__ import annotations

from absl import app, flags

from hieramas_jax.experiment.cli import parse_flags_or_exit
from hieramas_jax.experiment.provenance import atomic_write_json, provenance
from hieramas_jax.experiment.sim_fit import fit_all
from hieramas_jax.paths import DATA_DIR

FLAGS = flags.FLAGS
flags.DEFINE_integer("math_items", 500, "MATH items (all 500).", lower_bound=1)
flags.DEFINE_integer("mmlu_items", 3000, "MMLU-Redux items (all 3000).", lower_bound=1)
flags.DEFINE_integer("code_items", 164, "HumanEval+ items (all 164), each under 3 sim seeds.", lower_bound=1)

FIT_PATH = DATA_DIR / "sim" / "collaboration_fit.json"


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  record = fit_all({"math": FLAGS.math_items, "mmlu_redux": FLAGS.mmlu_items, "humaneval_plus": FLAGS.code_items})
  record["provenance"] = provenance(seed=0, benchmarks=("humaneval_plus", "math", "mmlu_redux"),
                                    flags={"math_items": FLAGS.math_items, "mmlu_items": FLAGS.mmlu_items,
                                           "code_items": FLAGS.code_items}, backend="sim-in-process")
  atomic_write_json(FIT_PATH, record)
  print(f"wrote {FIT_PATH.relative_to(DATA_DIR.parent.parent)}: RHO_TAU={record['RHO_TAU']} "
        f"RECOGNITION_MAX={record['RECOGNITION_MAX']} ERROR_SHARED_SPREAD={record['ERROR_SHARED_SPREAD']}")


if __name__ == "__main__":
  app.run(main, flags_parser=parse_flags_or_exit)
