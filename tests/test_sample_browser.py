"""The sample browser on synthetic run directories (fast): a quick look's table (`table1_limit30.json`) and a
run root are both browsable; per cell a small query list, the detail loaded a chunk at a time; deep links,
text search, sort by cost; cells whose run directory is not on this machine are counted, not listed."""

from __future__ import annotations

import json

import pytest

from hieramas_jax.benchmarks import data as data_lib
from hieramas_jax.report.samples import CHUNK, write_samples
from chromium_page import chromium_path, load_page

N = 30  # two detail chunks per cell


def _cell(root, method, pool, ids, cost_of):
  run_dir = root / "sim-seed0" / "main" / "seed0" / pool / "math" / method
  run_dir.mkdir(parents=True)
  (run_dir / "config.json").write_text(json.dumps({"cell": {"method": method, "benchmark": "math", "pool": pool,
                                                           "setting": "main", "seed": 0, "tag": ""}}))
  gold = data_lib.items_by_id("math")
  with open(run_dir / "items.jsonl", "w", encoding="utf-8") as items, \
       open(run_dir / "traces.jsonl", "w", encoding="utf-8") as traces:
    for k, i in enumerate(ids):
      correct = (k + len(method)) % 3 != 0
      items.write(json.dumps({"item_id": i, "correct": correct, "extracted": f"x{k}", "detail": "string match",
                              "cost_usd": cost_of(k), "prompt_tokens": 10, "completion_tokens": 20, "n_calls": 1,
                              "cached_calls": 0, "trace": {}}) + "\n")
      traces.write(json.dumps({"item_id": i, "correct": correct, "target": gold[i].answer,
                               "final_text": f"{method} says x{k}", "calls": [
                                   {"position": "answer", "model": pool, "text": f"{method} response {k}",
                                    "cost_usd": cost_of(k), "prompt_tokens": 10, "completion_tokens": 20}]}) + "\n")
  return {"method": method, "label": method, "benchmark": "math", "pool": pool, "setting": "main", "seed": 0,
          "run_dir": str(run_dir)}


@pytest.fixture(name="browsable")
def _browsable(tmp_path):
  ids = sorted(data_lib.items_by_id("math"))[:N]
  runs, results = tmp_path / "runs", tmp_path / "results"
  results.mkdir()
  cells = {f"{m}|math|gpt-5-mini|main|seed0": _cell(runs, m, "gpt-5-mini", ids, lambda k: 0.001 * ((k * 7) % N + 1))
           for m in ("base", "cot")}
  cells["sc|math|gpt-5-mini|main|seed0"] = {"method": "sc", "benchmark": "math", "pool": "gpt-5-mini",
                                            "run_dir": str(tmp_path / "elsewhere" / "sc")}  # not on this machine
  (results / "table1_limit30.json").write_text(json.dumps({"cells": cells}))  # a quick look's name
  _cell(runs, "full_graph", "qwen3-80b", ids, lambda k: 0.002)  # only in the run root
  return ids, runs, results


def test_a_quick_look_and_a_run_root_are_browsable_chunked_and_absent_cells_not_listed(browsable, tmp_path):
  ids, runs, results = browsable
  page, n = write_samples(results, tmp_path / "samples")
  assert n == 2  # base and cot; sc's run directory is absent: counted, not a "(0/0)" cell
  text = page.read_text()
  manifest = json.loads(text.split("const CELLS = ")[1].split(";\n")[0])
  assert [c["method"] for c in manifest] == ["base", "cot"] and all(c["n"] == N for c in manifest)
  assert json.loads(text.split("const ABSENT = ")[1].split(";\n")[0]) == ["sc|math|gpt-5-mini|main|seed0"]
  cell_files = sorted((tmp_path / "samples" / "cells").glob("*/*.js"))
  assert len(cell_files) == 2 * -(-N // CHUNK)  # each cell's detail in chunks of CHUNK queries
  page, n = write_samples(results, tmp_path / "with_root", run_root=runs)
  assert n == 3  # the run root's own cell too (base and cot once: the same run directories)


BROWSE = r"""(async () => {
  const until = async f => { for (let i = 0; i < 200 && !f(); i++) await new Promise(r => setTimeout(r, 50)); };
  const $ = id => document.getElementById(id);
  await until(() => document.querySelector('#detail h2'));
  const deep = {shown: $('detail').querySelector('h2').textContent, a: $('method-a').value, b: $('method-b').value,
                cols: [...document.querySelectorAll('.col[data-method]')].map(c => c.dataset.method),
                responses: [...document.querySelectorAll('[data-response]')].map(e => e.textContent),
                options: [...$('method-a').options].map(o => o.textContent), absent: $('absent').textContent};
  $('sort').value = 'cost-down'; $('sort').dispatchEvent(new Event('change'));
  const costs = [...document.querySelectorAll('#list li')].map(li => +li.dataset.cost);
  $('search').value = 'x7'; $('search').dispatchEvent(new Event('input'));
  const found = [...document.querySelectorAll('#list li')].map(li => li.dataset.id);
  document.querySelector('#list li').click();
  await until(() => $('detail').querySelector('h2').textContent === found[0]);
  return {deep, costs, found, hash: location.hash};
})()"""


def test_the_browser_opens_a_deep_link_searches_and_sorts_by_cost_in_chromium(browsable, tmp_path):
  ids, runs, results = browsable
  page, _ = write_samples(results, tmp_path / "samples", run_root=runs)
  if chromium_path() is None:
    pytest.skip("chromium is not installed and apt-get could not install it here (make install tries)")
  target = ids[CHUNK + 2]  # in the second chunk
  link = "&".join(f"{k}={v}" for k, v in {"setting": "main", "benchmark": "math", "pool": "gpt-5-mini", "a": "cot",
                                           "b": "base", "q": target.replace("/", "%2F")}.items())
  loaded = load_page(page, tmp_path / "browse.png", script=BROWSE, fragment=link)
  assert loaded.errors == []
  v = loaded.value
  k = ids.index(target)
  assert v["deep"]["shown"] == target and (v["deep"]["a"], v["deep"]["b"]) == ("cot", "base")
  assert v["deep"]["cols"] == ["cot", "base"] and v["deep"]["responses"] == [f"cot response {k}", f"base response {k}"]
  assert not any("(0/0)" in o for o in v["deep"]["options"]) and v["deep"]["absent"].startswith("1 cell(s)")
  assert v["costs"] == sorted(v["costs"], reverse=True) and len(v["costs"]) == N
  assert v["found"] == [ids[7]]  # the extracted answer "x7" (ids, questions and answers are searched)
  assert f"q={ids[7].replace('/', '%2F')}" in v["hash"] and "search=x7" in v["hash"]
