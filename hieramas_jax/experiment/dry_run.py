"""What a run would spend, before it spends anything: `--dry_run`.

The estimate comes from the suite's own committed run of the same cells on the embedded simulated pool
(`results/table1.json`, or `table3.json` for the generalization setting): every cell there records,
per model, the calls and prompt/completion tokens of its test queries and, apart, of its training. A
dry run scales each cell's figures to the requested number of test and training queries (linearly),
prices every model's tokens at the chosen endpoints' prices (a pool file's dated prices, else the
suite's frozen price table), and prints calls, tokens and dollars per cell and in total. It sends no
request and writes nothing, so it answers in seconds.

It is an estimate, and says so: real models write longer or shorter answers than the sim's calibrated
lengths (reasoning models in particular), and a learned method's choices on real models differ from
its choices on the sim. The sim profile the reference run used is printed with the figures.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any, Mapping

from hieramas_jax.experiment.spec import TableSpec, cell_items
from hieramas_jax.llm.registry import MODELS
from hieramas_jax.paths import RESULTS_DIR

REFERENCE_FILES = {"main": "table1.json", "generalization": "table3.json"}


@dataclasses.dataclass(frozen=True)
class CellEstimate:
  key: str
  found: bool
  inference: tuple[int, int, int, float]  # calls, prompt tokens, completion tokens, USD
  training: tuple[int, int, int, float]


def _priced(usage: Mapping[str, list[int]], scale: float, prices: Mapping[str, tuple[float, float]]):
  calls = prompt = completion = 0
  usd = 0.0
  for model, (c, p, t) in usage.items():
    price_in, price_out = prices.get(model) or (MODELS[model].price_in, MODELS[model].price_out)
    calls += round(c * scale)
    prompt += round(p * scale)
    completion += round(t * scale)
    usd += scale * (p * price_in + t * price_out) / 1e6
  return calls, prompt, completion, usd


def endpoint_prices(endpoints) -> dict[str, tuple[float, float]]:
  """short name -> (USD per 1M in, out) on the chosen endpoints (the registry's where they set none)."""
  prices = {}
  for ep in endpoints:
    for model in ep.model_ids:
      if model in MODELS:
        prices[model] = tuple(ep.prices.get(model) or (MODELS[model].price_in, MODELS[model].price_out))
  return prices


def estimate(spec: TableSpec, prices: Mapping[str, tuple[float, float]], *,
             results_dir: str | pathlib.Path = RESULTS_DIR) -> tuple[list[CellEstimate], dict[str, Any]]:
  """Per-cell estimates for `spec` at `prices`, and the reference run's provenance."""
  path = pathlib.Path(results_dir) / REFERENCE_FILES[spec.setting]
  reference = json.loads(path.read_text()) if path.exists() else {"cells": {}}
  recorded = {}
  for cell in reference["cells"].values():
    recorded[(cell["label"], cell["benchmark"], cell["pool"])] = cell
  sizes = {b: cell_items(spec, b) for b in spec.benchmarks}
  out = []
  for cell in spec.cells():
    ref = recorded.get((cell.label, cell.benchmark, cell.pool))
    if ref is None or "usage_by_model" not in ref:
      out.append(CellEstimate(cell.key, False, (0, 0, 0, 0.0), (0, 0, 0, 0.0)))
      continue
    items = sizes[cell.benchmark]
    inference = _priced(ref["usage_by_model"], len(items.test) / max(ref["sizes"]["test"], 1), prices)
    training = (0, 0, 0, 0.0)
    if ref.get("training") and ref["training"].get("by_model"):
      scale = len(items.train) / max(ref["sizes"]["train"], 1)
      training = _priced(ref["training"]["by_model"], scale, prices)
    out.append(CellEstimate(cell.key, True, inference, training))
  return out, {"file": str(path.relative_to(pathlib.Path(results_dir).parent)) if path.exists() else str(path),
               "provenance": reference.get("provenance", {})}


def render(estimates: list[CellEstimate], reference: Mapping[str, Any], endpoint_label: str) -> str:
  """The dry run's report: a table per cell and the totals, stating what the estimate rests on."""
  from hieramas_jax.experiment.provenance import sim_title  # pylint: disable=import-outside-toplevel
  lines = [f"DRY RUN (nothing sent, nothing written): an ESTIMATE for {endpoint_label}, from the suite's run of "
           f"the same cells on the {sim_title(reference)} ({reference['file']}), scaled to the "
           "requested query counts and priced at the chosen endpoints' prices.",
           f"{'cell':58s} {'inf calls':>9s} {'inf tokens':>11s} {'inf $':>9s} {'train calls':>11s} "
           f"{'train tokens':>12s} {'train $':>9s}"]
  total_inf = [0, 0, 0.0]
  total_train = [0, 0, 0.0]
  missing = []
  for e in estimates:
    if not e.found:
      missing.append(e.key)
      continue
    ic, ip, it, iu = e.inference
    tc, tp, tt, tu = e.training
    lines.append(f"{e.key:58s} {ic:9d} {ip + it:11d} {iu:9.4f} {tc:11d} {tp + tt:12d} {tu:9.4f}")
    total_inf = [total_inf[0] + ic, total_inf[1] + ip + it, total_inf[2] + iu]
    total_train = [total_train[0] + tc, total_train[1] + tp + tt, total_train[2] + tu]
  lines.append(f"{'TOTAL':58s} {total_inf[0]:9d} {total_inf[1]:11d} {total_inf[2]:9.4f} {total_train[0]:11d} "
               f"{total_train[1]:12d} {total_train[2]:9.4f}")
  lines.append(f"estimated total: ${total_inf[2] + total_train[2]:.2f} (inference ${total_inf[2]:.2f}, "
               f"training ${total_train[2]:.2f})")
  if missing:
    lines.append(f"no simulated reference for {len(missing)} cell(s), not counted: {', '.join(missing[:6])}"
                 + (" ..." if len(missing) > 6 else "") + " (run them on the sim first to estimate them)")
  return "\n".join(lines)


def dry_run_report(spec: TableSpec, flag_values: Any, *, results_dir: str | pathlib.Path = RESULTS_DIR) -> str:
  """The `--dry_run` text for a spec and the backend flags: prices from the pool file (no key needed:
  nothing is sent) or, for the shorthand flags, from the suite's frozen price table."""
  from hieramas_jax.llm import pool as pool_lib  # pylint: disable=import-outside-toplevel
  pool_file = getattr(flag_values, "pool_file", None)
  if pool_file:
    models = pool_lib.read_pool_file(pool_file)
    prices = {m.name: (m.price_in, m.price_out) for m in models.values()}
    label = f"pool file {pool_file}"
  else:
    prices = {m: (s.price_in, s.price_out) for m, s in MODELS.items()}
    label = f"--backend={flag_values.backend} at the suite's frozen prices"
  estimates, reference = estimate(spec, prices, results_dir=results_dir)
  from hieramas_jax.experiment.provenance import command_line, process_commit  # pylint: disable=import-outside-toplevel
  ref_git = (reference.get("provenance") or {}).get("git", {})
  head = (f"# made by: {command_line()}\n# at commit {process_commit()['commit']}; reference run at commit "
          f"{ref_git.get('commit')}; prices: {label}\n")
  return head + render(estimates, reference, label)
