"""The paper's published figures (arXiv 2602.20229) and the names the tables print.

Only what the paper states: Table 1 rows for Base, CoT, Self-Consistency, SC+CoT and LLM-Debate;
the averages the text gives for Full-Graph (92.78) and HieraMAS (94.61); Table 4 (inference cost,
GPT-5-Mini setting) and Table 11 (training cost). Every other published cell is unknown to us and
printed as "-". All on real models and the paper's own test splits.
"""

from __future__ import annotations

import json
from typing import Mapping

from hieramas_jax.methods import registry
from hieramas_jax.paths import DATA_DIR

POOL_TITLES = {"gpt-5-mini": "GPT-5-Mini", "qwen3-80b": "Qwen3-80B"}

# Table 1's rows: the paper's 11 methods in its row order, then the suite's total-cost HieraMAS variant
# (a named recipe beyond the paper). `reproduce_table1.py` runs these by default.
TABLE1_METHODS = ("base", "cot", "sc", "sc_cot", "debate", "full_graph", "random_graph", "gdesigner", "masrouter",
                  "aflow", "hieramas", "hieramas_total_cost")

# Learned multi-agent methods published after the paper (issue 32), run on the same runner: the rows of
# `reproduce_table1.py --extended` (results/table1_extended.*), never of Table 1 itself.
BEYOND_PAPER_METHODS = ("agentprune", "maas", "arg_designer")

# Their own papers' figures on the benchmarks that match ours (their models, their splits), each with its source,
# locator and mark (P: the paper; S: a secondary source), and the paper's CoT baseline on the same backbone; a
# figure not found or not verified is null. Rendered under table1_extended (report/table1.py).
PUBLISHED_BEYOND_PAPER_FILE = DATA_DIR / "published_beyond_paper.json"


def published_beyond_paper() -> dict:
  """The published figures of BEYOND_PAPER_METHODS (`PUBLISHED_BEYOND_PAPER_FILE`)."""
  return json.loads(PUBLISHED_BEYOND_PAPER_FILE.read_text())


# Table 1 row order of the paper, then what this suite adds.
METHOD_ORDER = TABLE1_METHODS + ("static_search", "random_config")
# Paper Table 1's component columns: Multi (multi-agent), Topo (optimises topology), Role (optimises roles
# and LLMs in each role), Node (optimises intra-node configuration). The paper's extracted text shows the
# marks of its first five rows; the others are our reading of each method's definition (docs/methods.md).
COMPONENTS = {"base": "----", "cot": "----", "sc": "M---", "sc_cot": "M---", "debate": "M---",
              "full_graph": "M---", "random_graph": "M---", "gdesigner": "MT--", "masrouter": "MTR-",
              "aflow": "MT--", "hieramas": "MTRN", "hieramas_total_cost": "MTRN", "static_search": "MTRN",
              "random_config": "M---",
              # Beyond the paper, our reading: AgentPrune prunes a communication graph; MaAS samples an operator
              # workflow per query; ARG-Designer generates agents, their roles and edges per query.
              "agentprune": "MT--", "maas": "MT--", "arg_designer": "MTR-"}
# Methods the paper trains (and the suite fits): Table 11's rows.
LEARNED = ("gdesigner", "aflow", "masrouter", "hieramas", "hieramas_total_cost")

_COLUMNS = [(b, p) for b in ("humaneval_plus", "math", "mmlu_redux") for p in ("gpt-5-mini", "qwen3-80b")]

# Accuracy %, paper Table 1.
TABLE1: Mapping[str, Mapping[tuple[str, str], float]] = {
    m: dict(zip(_COLUMNS, row)) for m, row in {
        "base": (89.06, 84.14, 77.78, 74.44, 92.00, 82.40),
        "cot": (87.50, 85.94, 92.22, 90.00, 93.60, 89.60),
        "sc": (89.06, 87.50, 93.33, 91.11, 94.40, 83.20),
        "sc_cot": (90.62, 85.94, 94.44, 92.22, 93.60, 92.80),
        "debate": (87.50, 87.50, 94.44, 94.44, 92.80, 92.00),
    }.items()}
# Averages over the six cells that the paper's text gives where its table rows are not available to us.
TABLE1_AVERAGE = {"base": 83.14, "cot": 89.81, "sc": 89.77, "sc_cot": 91.60, "debate": 91.45, "full_graph": 92.78,
                  "hieramas": 94.61}
# Rows whose published figures the simulated pool's calibration was fitted on (issue 7): on the sim they
# match the paper by construction; every other row is the sim's prediction.
FITTED_ON_SIM = ("base", "cot", "sc", "sc_cot")

# USD over the test split, GPT-5-Mini setting (Table 4: inference; Table 11: training).
TABLE4 = {"gdesigner": {"humaneval_plus": 1.33, "math": 2.16, "mmlu_redux": 3.66},
          "masrouter": {"humaneval_plus": 0.12, "math": 0.32, "mmlu_redux": 0.15},
          "hieramas": {"humaneval_plus": 0.53, "math": 1.52, "mmlu_redux": 1.29}}
TABLE11 = {"gdesigner": {"math": 1.22, "humaneval_plus": 1.95, "mmlu_redux": 3.51},
           "aflow": {"math": 18.62, "humaneval_plus": 28.64, "mmlu_redux": 13.94},
           "masrouter": {"math": 1.97, "humaneval_plus": 0.54, "mmlu_redux": 0.46},
           "hieramas": {"math": 2.03, "humaneval_plus": 1.55, "mmlu_redux": 1.85}}
# The text's one Full-Graph cost: MMLU-Redux, GPT-5-Mini.
FULL_GRAPH_COST = {"mmlu_redux": 4.23}


def method_title(label: str) -> str:
  """Title of a row label ("hieramas-wo_graph" -> "HieraMAS (wo_graph)")."""
  method, _, tag = label.partition("-")
  title = registry.title_of(method)
  return f"{title} ({tag})" if tag else title


def order_key(label: str) -> tuple[int, str]:
  method = label.partition("-")[0]
  return (METHOD_ORDER.index(method) if method in METHOD_ORDER else len(METHOD_ORDER), label)
