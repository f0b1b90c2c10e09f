"""Fit the simulated pool's collaboration parameters on published rows (in-process, no HTTP).

  python experiments/fit_sim.py                  # the aggregation mechanism only (~5 min on 2 cores)
  python experiments/fit_sim.py --sampling       # also RHO_TAU and the wrong-answer spreads (slow)

Writes hieramas_jax/data/sim/collaboration_fit.json. The aggregation mechanism (params.Aggregation:
self weight, self confidence, support power, recognition strength and gap) is fitted on the
Mixture-of-Agents and Self-MoA rows of the published evidence, mechanism-level, with internal
hold-outs; the low / fitted / high profiles come from the fit's confidence region
(experiment/aggregation_fit.py). With --sampling the shared wrong-answer spreads (error-coincidence
targets) and RHO_TAU (the paper's SC and SC+CoT rows) are refitted through the in-process pipeline
(experiment/sim_fit.py); otherwise they are kept from the existing file. The chosen values must be
copied into hieramas_jax/sim/params.py (a test checks they agree) and verified through the real
pipeline with `make calibrate`.
"""

from __future__ import annotations

import json

from absl import flags

from hieramas_jax.experiment import cli
from hieramas_jax.experiment.aggregation_fit import fit_aggregation
from hieramas_jax.experiment.provenance import provenance
from hieramas_jax.experiment.sim_fit import fit_all
from hieramas_jax.fileio import atomic_write_json
from hieramas_jax.paths import DATA_DIR

FLAGS = flags.FLAGS
flags.DEFINE_integer("mechanism_items", 10000, "Synthetic items per population in the aggregation fit.",
                     lower_bound=100)
flags.DEFINE_bool("sampling", False, "Also refit RHO_TAU and the wrong-answer spreads (in-process pipeline).")
flags.DEFINE_integer("math_items", 500, "MATH items (all 500) for --sampling.", lower_bound=1)
flags.DEFINE_integer("mmlu_items", 3000, "MMLU-Redux items (all 3000) for --sampling.", lower_bound=1)
flags.DEFINE_integer("code_items", 164, "HumanEval+ items (all 164), each under 3 sim seeds, for --sampling.",
                     lower_bound=1)

FIT_PATH = DATA_DIR / "sim" / "collaboration_fit.json"


def main():
  if FLAGS.sampling:
    record = fit_all({"math": FLAGS.math_items, "mmlu_redux": FLAGS.mmlu_items, "humaneval_plus": FLAGS.code_items})
  else:
    old = json.loads(FIT_PATH.read_text())
    record = {k: old[k] for k in ("n_items", "code_seeds", "ERROR_SHARED_SPREAD", "RHO_TAU", "rho_tau_grid")}
  record["aggregation"] = fit_aggregation(n_items=FLAGS.mechanism_items)
  record["provenance"] = provenance(seed=0, benchmarks=("humaneval_plus", "math", "mmlu_redux"),
                                    flags={k: FLAGS[k].value for k in ("mechanism_items", "sampling", "math_items",
                                                                       "mmlu_items", "code_items")},
                                    backend="sim-in-process")
  atomic_write_json(FIT_PATH, record)
  print(f"wrote {FIT_PATH.relative_to(DATA_DIR.parent.parent)}: RHO_TAU={record['RHO_TAU']} "
        f"profiles={record['aggregation']['profiles']}")


if __name__ == "__main__":
  cli.run(main)
