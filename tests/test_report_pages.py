"""The report layer on a tiny real run: Tables 2/6/7 from ablation cells, the offline HTML page rendered in
headless Chromium (no console error, every figure loaded, a screenshot), and the W&B report built offline."""

from __future__ import annotations

import asyncio
import html
import json
import shutil
import socket

import pytest

from hieramas_jax.benchmarks import data as data_lib
from hieramas_jax.experiment.provenance import provenance
from hieramas_jax.experiment.rundir import from_repo
from hieramas_jax.experiment.spec import SAME_RUN_UNTAGGED
from hieramas_jax.fileio import atomic_write_json
from hieramas_jax.mas.roles import roles_for
from hieramas_jax.methods.hieramas.config import HieraMASConfig
from hieramas_jax.paths import RESULTS_DIR
from hieramas_jax.report import hieramas as hieramas_report
from hieramas_jax.report.ablations import write_ablation_tables
from hieramas_jax.report.hieramas_figures import jaccard_matrix
from hieramas_jax.report.html import build_report, write_report
from hieramas_jax.report.stats import pareto_front
from hieramas_jax.report.sweeps import sweep_record, write_sweep
from hieramas_jax.report.table1 import write_tables
from chromium_page import chromium_path, load_page
import tiny_reproduction as tiny

TINY = tiny.TINY_HIERAMAS


def test_pareto_front_and_jaccard_by_hand():
  # (cost, accuracy): b is dominated by a (cheaper and more accurate); c is the most accurate.
  assert pareto_front([(1.0, 80.0), (2.0, 70.0), (3.0, 90.0), (1.0, 80.0)]) == [0, 3, 2]
  jac = jaccard_matrix([[[0, 1], [1, 2]], [[0, 1]], []])
  assert jac[0, 1] == pytest.approx(0.5) and jac[1, 2] == 0.0 and jac[2, 2] == 1.0


@pytest.fixture(scope="module")
def tiny_results(tiny_reproduction, tmp_path_factory):
  """results/ of the session's tiny real reproduction: Table 1 (base + HieraMAS), HieraMAS's results file,
  its w/o Graph ablation (loads the main fit, run here into the reproduction's run root), the committed
  calibration, and a K sweep of the two."""
  results = tmp_path_factory.mktemp("tiny") / "results"
  main = tiny_reproduction.table
  ablation = asyncio.run(tiny.run(tiny_reproduction.sim,
                                  tiny.spec(("hieramas",), {"hieramas": {**TINY, "graph_mode": "random_vote"}},
                                            tag="wo_graph", load_from={"hieramas": SAME_RUN_UNTAGGED}),
                                  tiny_reproduction.run_root))
  write_tables(main, results)
  files = []
  for table, tag in ((main, ""), (ablation, "wo_graph")):
    cell = table["cells"][f"hieramas{'-' + tag if tag else ''}|mmlu_redux|gpt-5-mini|main|seed0"]
    cfg = HieraMASConfig(benchmark="mmlu_redux", **TINY, **({"graph_mode": "random_vote"} if tag else {}))
    record = hieramas_report.results_record(cell, hieramas_report.read_items(from_repo(cell["run_dir"])),
                                            cfg.to_json(), roles_for("mmlu_redux"), cell["sizes"], table["provenance"])
    path = results / f"{hieramas_report.results_name('mmlu_redux', 'gpt-5-mini', tag)}.json"
    atomic_write_json(path, record)
    files.append((path, record))
  shutil.copy(RESULTS_DIR / "calibration.json", results / "calibration.json")
  sweep = {"name": "k_pool_size", "program": "experiments/train_hieramas.py", "flags": {}, "grid": {"k_pool": [8, 50]},
           "description": "tiny"}
  write_sweep(sweep_record(sweep, [{"values": {"k_pool": 8}, "results_file": files[0][0].name, "results": files[0][1]},
                                   {"values": {"k_pool": 50}, "results_file": "x.json", "results": None}],
                           provenance(seed=0, backend="sim", command="test")), results)
  write_ablation_tables(results, results, provenance(seed=None, backend="sim", command="test"))
  return results


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_tables_2_6_7_are_generated_from_the_ablation_cells(tiny_results):
  t2 = json.loads((tiny_results / "table2.json").read_text())
  main = json.loads((tiny_results / "hieramas_mmlu_redux_gpt-5-mini.json").read_text())
  wo = json.loads((tiny_results / "hieramas_mmlu_redux_gpt-5-mini_wo_graph.json").read_text())
  assert t2["settings"] == [["mmlu_redux", "gpt-5-mini"]]
  assert t2["cells"]["main|mmlu_redux|gpt-5-mini"]["accuracy"] == main["accuracy"]
  assert t2["cells"]["wo_graph|mmlu_redux|gpt-5-mini"]["mean_cost_usd"] == wo["mean_cost_usd"]
  assert t2["cells"]["wo_llm_selection|mmlu_redux|gpt-5-mini"]["missing"]
  md = (tiny_results / "table2.md").read_text()
  assert md.startswith("# Table 2") and "simulated pool" in md.splitlines()[0]
  assert f"| HieraMAS | {main['accuracy']:.2f} · " in md
  hieramas_row = next(line for line in md.splitlines() if line.startswith("| HieraMAS |"))
  assert hieramas_row.endswith("| *95.20* · *$1.29* |")  # the paper's published figure beside ours
  assert "--flagfile=experiments/ablations/wo_llm_selection.flags --benchmark=mmlu_redux" in md
  assert "## Provenance" in md and "hieramas_mmlu_redux_gpt-5-mini_wo_graph.json" in md
  t6 = json.loads((tiny_results / "table6.json").read_text())
  t7 = json.loads((tiny_results / "table7.json").read_text())
  assert t6["cells"]["w6|mmlu_redux|gpt-5-mini"]["missing"] and not t7["cells"]["main|mmlu_redux|gpt-5-mini"]["missing"]
  # The run saved what Figure 4 and the curves need.
  assert len(main["policy_probabilities"]["models"]) == len(main["policy_probabilities"]["synthesizer"])
  assert sum(main["policy_probabilities"]["synthesizer"]) == pytest.approx(1.0, abs=1e-3)
  assert [s for s, _ in main["curves"]["stage1/loss"]] == [1, 2] and wo["curves"] == {}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_report_holds_every_section_and_renders_in_chromium(tiny_results, tmp_path):
  text, page = build_report(tiny_results)
  expected = {"cost_accuracy_table1", "figure3_mmlu_redux_gpt-5-mini", "figure4_mmlu_redux_gpt-5-mini",
              "curves_mmlu_redux_gpt-5-mini", "calibration", "sweep_k_pool_size"}
  assert set(page.figures) == expected
  assert [a for a, _, _ in page.sections] == ["cost-accuracy", "figure3", "figure4", "curves", "calibration",
                                              "sweeps", "frontier", "samples", "tables"]
  assert "results/table3.json is missing" in text  # a missing input says so
  assert "results/hieramas_frontier.json is missing: run `make frontier`" in html.unescape(text)
  for table in ("table1.md", "table2.md", "table6.md", "table7.md", "sweep_k_pool_size.md"):
    assert f"<summary>results/{table}</summary>" in text
  assert "http://" not in text and "https://" not in text  # self-contained
  path, _ = write_report(tiny_results, tmp_path / "report")
  if chromium_path() is None:
    pytest.skip("chromium is not installed and apt-get could not install it here (make install tries)")
  loaded = load_page(path, tmp_path / "report" / "screenshot.png")
  assert loaded.errors == []
  assert sorted(f["name"] for f in loaded.figures) == sorted(expected)
  assert all(f["loaded"] and f["width"] > 100 for f in loaded.figures), loaded.figures
  assert loaded.images == len(expected)
  assert loaded.screenshot.read_bytes()[:4] == b"\x89PNG" and loaded.screenshot.stat().st_size > 10_000


def test_an_empty_results_dir_gives_a_page_that_says_what_is_missing(tmp_path):
  text, page = build_report(tmp_path)
  assert page.figures == []
  for needle in ("results/table1.json is missing", "No HieraMAS results file", "results/calibration.json is missing",
                 "No sweep results", "No tables in results/ yet"):
    assert needle in text


def test_the_wandb_report_is_built_without_any_network(monkeypatch):
  def no_network(*args, **kwargs):
    raise AssertionError("network access while building the report")
  monkeypatch.setattr(socket.socket, "connect", no_network)
  from hieramas_jax.report.wandb_report import build_report as build_wandb_report, describe
  report = build_wandb_report("me", "hieramas-jax", group="table1/sim-seed0-x")
  assert report.entity == "me" and report.project == "hieramas-jax"
  blocks = describe(report)
  headings = [b["text"] for b in blocks if b["type"] == "H2"]
  assert headings[:3] == ["Cost against accuracy (Table 1 cells)", "Per-query results (chosen graph, LLMs per "
                          "position)", "Training curves"]
  grids = [b for b in blocks if b["type"] == "PanelGrid"]
  metrics = {m for g in grids for p in g["panels"] for m in p["metrics"]}
  assert {"accuracy", "mean_cost_usd", "per_query", "stage1/loss", "stage2/train_loss", "k_pool",
          "num_proposers", "validation/full_graph/average"} <= metrics
  assert {"/stage1", "/stage2", "|seed"} <= {q for g in grids for q in g["runsets"]}
  assert all(r.filters == "Group = 'table1/sim-seed0-x'" for b in report.blocks if hasattr(b, "runsets")
             for r in b.runsets)


# Drives the sample browser: HieraMAS beside Base on MMLU-Redux, the "A wrong" filter, the first query opened.
BROWSE = r"""(async () => {
  const until = async f => { for (let i = 0; i < 200 && !f(); i++) await new Promise(r => setTimeout(r, 50)); };
  const set = async (id, v) => { const s = document.getElementById(id); s.value = v;
    s.dispatchEvent(new Event('change')); await new Promise(r => setTimeout(r, 50));
    await until(() => !document.getElementById('status').textContent.startsWith('loading')); };
  await until(() => document.querySelectorAll('#list li').length > 0);
  await set('setting', 'main'); await set('benchmark', 'mmlu_redux'); await set('pool', 'gpt-5-mini');
  await set('method-a', 'hieramas'); await set('method-b', 'base');
  const ids = [...document.querySelectorAll('#list li')].map(li => li.dataset.id);
  await set('correct', 'wrong'); const wrong = document.querySelectorAll('#list li').length;
  await set('correct', 'all');
  document.querySelector('#list li').click();
  await until(() => document.querySelector('#detail h2'));  // its detail chunk loads on opening
  document.querySelectorAll('details[data-call]').forEach(d => d.open = true);
  const all = sel => [...document.querySelectorAll(sel)].map(e => e.textContent);
  return {ids, wrong, methods: [...document.querySelectorAll('.col[data-method]')].map(c => c.dataset.method),
          gold: all('[data-gold]'), grade: all('[data-grade]'), extracted: all('[data-extracted]'),
          calls: document.querySelectorAll('details[data-call]').length, roles: all('details[data-call] .role'),
          responses: all('[data-response]'), notRecorded: all('.missing'), mas: document.querySelectorAll('[data-mas]').length,
          nodes: document.querySelectorAll('#detail svg circle').length};
})()"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_sample_browser_shows_every_query_with_its_prompts_gold_and_grade(tiny_results, tmp_path):
  path, _ = write_report(tiny_results, tmp_path / "report")
  text = path.read_text()
  assert 'href="samples/index.html"' in text
  samples = tmp_path / "report" / "samples" / "index.html"
  assert "http://" not in samples.read_text() and "https://" not in samples.read_text()
  table = json.loads((tiny_results / "table1.json").read_text())
  cell = table["cells"]["hieramas|mmlu_redux|gpt-5-mini|main|seed0"]
  items = hieramas_report.read_items(from_repo(cell["run_dir"]))
  base_items = {r["item_id"]: r for r in hieramas_report.read_items(
      from_repo(table["cells"]["base|mmlu_redux|gpt-5-mini|main|seed0"]["run_dir"]))}
  if chromium_path() is None:
    pytest.skip("chromium is not installed and apt-get could not install it here (make install tries)")
  loaded = load_page(samples, tmp_path / "samples.png", script=BROWSE)
  assert loaded.errors == []
  v = loaded.value
  assert sorted(v["ids"]) == sorted(r["item_id"] for r in items)  # every query listed
  assert v["wrong"] == sum(not r["correct"] for r in items)  # the correctness filter
  first = next(r for r in items if r["item_id"] == v["ids"][0])
  gold = data_lib.items_by_id("mmlu_redux")[first["item_id"]].answer
  assert v["methods"] == ["hieramas", "base"]  # side by side, the same query
  assert v["gold"] == [gold, gold]
  assert v["grade"] == ["correct" if first["correct"] else "wrong",
                        "correct" if base_items[first["item_id"]]["correct"] else "wrong"]
  assert v["extracted"][0] == (first["extracted"] or "(none)")
  assert v["calls"] == first["n_calls"] + base_items[first["item_id"]]["n_calls"]
  assert "system" in v["roles"] and "user" in v["roles"] and all(v["responses"])  # prompts and responses
  assert v["notRecorded"] == [] and v["mas"] == 1 and v["nodes"] == first["trace"]["config"]["nodes"].__len__()


def test_rewriting_the_sample_browser_removes_cell_files_no_index_links(tiny_results, tmp_path):
  """A cell rerun under another id left its old files behind: main's samples/ had grown to 1.1 GB beside a
  738 MB report. A rewrite keeps exactly the files it wrote."""
  from hieramas_jax.report.samples import write_samples  # pylint: disable=import-outside-toplevel
  out = tmp_path / "samples"
  _, n = write_samples(tiny_results, out)
  first = sorted(p.relative_to(out) for p in out.rglob("*.js"))
  assert n > 0 and first
  stale = [out / "cells" / "gone.js", out / "cells" / "gone" / "0.js"]
  for p in stale:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("window.SAMPLES_LOADED('gone', {});\n")
  write_samples(tiny_results, out)
  assert sorted(p.relative_to(out) for p in out.rglob("*.js")) == first
  assert not (out / "cells" / "gone").exists()


def test_the_cost_accuracy_plot_takes_the_extended_table_when_there_is_one(tmp_path):
  """Issue 32: the plot shows the methods beyond the paper, which only table1_extended.json holds."""
  from hieramas_jax.report.html import cost_accuracy_section  # pylint: disable=import-outside-toplevel
  from hieramas_jax.report.page import Page  # pylint: disable=import-outside-toplevel

  def record(methods):
    cells = {f"{m}|math|gpt-5-mini|main|seed0": {"label": m, "method": m, "benchmark": "math", "pool": "gpt-5-mini",
                                                 "setting": "main", "seed": 0, "n": 10, "n_correct": 8 + i % 2,
                                                 "accuracy": 80.0 + 10 * (i % 2), "cost_usd": 0.01 * (i + 1)}
             for i, m in enumerate(methods)}
    return {"cells": cells, "provenance": {"backend": "sim"}}

  atomic_write_json(tmp_path / "table1.json", record(["base", "hieramas"]))
  page = Page()
  text = cost_accuracy_section(page, tmp_path)
  assert page.figures == ["cost_accuracy_table1"] and "results/table1.json" in text
  atomic_write_json(tmp_path / "table1_extended.json", record(["base", "hieramas", "agentprune", "maas"]))
  page = Page()
  text = cost_accuracy_section(page, tmp_path)
  assert page.figures == ["cost_accuracy_table1"] and "results/table1_extended.json" in text
