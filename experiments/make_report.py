"""The offline HTML report and the ablation tables, from `results/` (make report).

  python experiments/make_report.py    # results/table{2,6,7}.*, stage1_recipe.*, hieramas_cells.*, report/
  python experiments/make_report.py --results=/tmp/r --out_dir=/tmp/r/report
  python experiments/make_report.py --results=/tmp/t1 --run_root=runs/table1-limit3-train8   # a quick look

First Tables 2, 6 and 7 from the HieraMAS ablation results files (`report/ablations.py`), then one
self-contained page with every table and figure (`report/html.py`) and the sample browser beside it
(`report/samples.py`, results/report/samples/): open results/report/index.html.
"""

from __future__ import annotations

import json
import pathlib

from absl import flags

from hieramas_jax.errors import UserError
from hieramas_jax.experiment import cli
from hieramas_jax.experiment.cli import selected_flags
from hieramas_jax.experiment.provenance import provenance
from hieramas_jax.paths import RESULTS_DIR
from hieramas_jax.report.ablations import write_ablation_tables, write_hieramas_cells, write_stage1_recipe
from hieramas_jax.report.html import write_report

FLAGS = flags.FLAGS
flags.DEFINE_string("results", str(RESULTS_DIR), "The results directory the report is built from.")
flags.DEFINE_string("out_dir", None, "Where index.html goes (default: <results>/report).")
flags.DEFINE_bool("samples", True, "Also write the sample browser (<out_dir>/samples/: every query of every cell "
                  "with a run directory on this machine).")
flags.DEFINE_string("run_root", None, "Also browse every cell directory under this run root (a run with no "
                    "results file yet, or a quick look's).")
flags.DEFINE_bool("tables", True, "Also (re)write table2/6/7, stage1_recipe and hieramas_cells into --results first.")


def _backend(results: pathlib.Path) -> str | None:
  backends = set()
  for f in results.glob("hieramas_*.json"):
    try:
      backends.add((json.loads(f.read_text()).get("provenance") or {}).get("backend"))
    except json.JSONDecodeError:
      continue
  return ",".join(sorted(b for b in backends if b)) or None


def main():
  results = pathlib.Path(FLAGS.results)
  if not results.is_dir():
    raise UserError(f"--results={results} is not a directory")
  written = []
  if FLAGS.tables:
    prov = provenance(seed=None, flags=selected_flags(FLAGS, ("results", "out_dir", "tables")),
                      backend=_backend(results))
    written += write_ablation_tables(results, results, prov)
    written += write_stage1_recipe(results, results, prov)
    written += write_hieramas_cells(results, results, prov)
  if FLAGS.run_root is not None and not pathlib.Path(FLAGS.run_root).is_dir():
    raise UserError(f"--run_root={FLAGS.run_root} is not a directory")
  path, page = write_report(results, FLAGS.out_dir or results / "report", samples=FLAGS.samples,
                            run_root=FLAGS.run_root)
  written.append(path)
  print(f"wrote {', '.join(str(p) for p in written)} ({len(page.figures)} figures, {len(page.sections)} sections)")


if __name__ == "__main__":
  cli.run(main)
