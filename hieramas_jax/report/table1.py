"""Table 1 as Markdown: accuracy, cost and n per method x benchmark x pool, with provenance.

Rebuilt from the JSON record only (`results/table1.json`), so a table can be regenerated without
rerunning anything.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping, Sequence

BENCHMARK_TITLES = {"humaneval_plus": "HumanEval+", "math": "MATH", "mmlu_redux": "MMLU-Redux"}
POOL_TITLES = {"gpt-5-mini": "GPT-5-Mini", "qwen3-80b": "Qwen3-80B"}
METHOD_TITLES = {"base": "Base", "cot": "CoT", "sc": "Self-Consistency", "sc_cot": "Self-Consistency+CoT"}

# The paper's Table 1 rows for the methods this suite has (accuracy %, its own small test splits).
PAPER_TABLE1: Mapping[str, Mapping[tuple[str, str], float]] = {
    m: dict(zip([(b, p) for b in ("humaneval_plus", "math", "mmlu_redux") for p in ("gpt-5-mini", "qwen3-80b")],
                row))
    for m, row in {
        "base": (89.06, 84.14, 77.78, 74.44, 92.00, 82.40),
        "cot": (87.50, 85.94, 92.22, 90.00, 93.60, 89.60),
        "sc": (89.06, 87.50, 93.33, 91.11, 94.40, 83.20),
        "sc_cot": (90.62, 85.94, 94.44, 92.22, 93.60, 92.80),
    }.items()}


def cell_key(method: str, benchmark: str, pool: str) -> str:
  return f"{method}|{benchmark}|{pool}"


def _fmt(x: float | None, spec: str) -> str:
  return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def table1_markdown(record: Mapping[str, Any]) -> str:
  """The Markdown table of a table1.json record (see `experiment.table1.run_table1`)."""
  methods: Sequence[str] = record["methods"]
  benchmarks: Sequence[str] = record["benchmarks"]
  pools: Sequence[str] = record["pools"]
  cells = record["cells"]
  prov = record["provenance"]
  sim = prov.get("backend") == "sim"
  cols = [(b, p) for b in benchmarks for p in pools]
  title = "Table 1 (first methods)" + (" - simulated pool" if sim else f" - {prov.get('backend')}")
  lines = [f"# {title}", ""]
  if sim:
    lines += [f"**{prov['label']}.** Accuracies are what the suite's methods score against the simulated "
              "LLM pool; they say nothing about the real models.", ""]
  lines += [f"Split: `{record['split']}`" + (f", first {record['limit']} items per benchmark"
                                             if record.get("limit") else "") +
            f"; seed {prov['seed']}; endpoint `{record.get('endpoint')}`"
            + (" (the suffix fingerprints the simulator's code and data)" if sim else "")
            + ". Cell: accuracy % (total cost USD over the split, n).", ""]
  header = "| Method | " + " | ".join(f"{BENCHMARK_TITLES.get(b, b)} {POOL_TITLES.get(p, p)}" for b, p in cols)
  lines += [header + " | Avg. acc | Total cost |", "|---" * (len(cols) + 3) + "|"]
  for m in methods:
    row = [METHOD_TITLES.get(m, m)]
    accs, cost = [], 0.0
    for b, p in cols:
      c = cells[cell_key(m, b, p)]
      row.append(f"{_fmt(c['accuracy'], '.2f')} (${_fmt(c['cost_usd'], '.4f')}, n={c['n']})")
      accs.append(c["accuracy"])
      cost += c["cost_usd"]
    row += [_fmt(sum(accs) / len(accs), ".2f"), f"${cost:.4f}"]
    lines.append("| " + " | ".join(row) + " |")
  paper_rows = [m for m in methods if m in PAPER_TABLE1]
  if paper_rows:
    lines += ["", "For reference, the paper's Table 1 (real models, its own test splits; accuracy %):", "",
              "| Method | " + " | ".join(f"{BENCHMARK_TITLES.get(b, b)} {POOL_TITLES.get(p, p)}"
                                       for b, p in cols) + " |",
              "|---" * (len(cols) + 1) + "|"]
    for m in paper_rows:
      lines.append("| " + " | ".join([METHOD_TITLES.get(m, m)] +
                                     [_fmt(PAPER_TABLE1[m].get((b, p)), ".2f") for b, p in cols]) + " |")
  lines += ["", "## Provenance", "", "Command:", "", "```", prov["command"], "```", "",
            "```json", json.dumps({k: v for k, v in prov.items() if k != "command"}, indent=2), "```", ""]
  return "\n".join(lines)
