"""Same seed, same bytes: a small table with learned methods, run from empty caches at concurrency 1 and
at 64 (two cells racing for the same texts to embed), writes the same results and the same parameters."""

from __future__ import annotations

import asyncio
import json
import pathlib

import numpy as np
import pytest

from hieramas_jax.experiment.backend import Backend
from hieramas_jax.experiment.runner import run_table
from hieramas_jax.experiment.spec import TableSpec
from hieramas_jax.learn import encoder as encoder_lib
from hieramas_jax.llm.cache import ResponseCache
from hieramas_jax.llm.client import LLMClient
from hieramas_jax.llm.endpoint import sim_endpoint
from hieramas_jax.sim.server import SimConfig, start_sim_in_thread

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

METHODS = ("gdesigner", "masrouter", "hieramas")
OPTIONS = {
    "gdesigner": {"iterations": 2, "batch_size": 2},
    "masrouter": {"epochs": 1, "max_batches": 2, "batch_size": 2},
    "hieramas": {"stage1_steps": 2, "stage1_batch": 2, "stage1_samples": 2, "stage1_val_every": 2, "k_pool": 8,
                 "stage2_graphs": 2, "stage2_epochs": 2, "stage2_batch": 4},
}
# What may differ between two runs of the same computation: clocks, and where the run lived.
# Replays (`cached`) depend on timing too, and so does each record's checksum (it covers the clocks).
VOLATILE = {"created_utc", "wall_s", "latency_s", "elapsed_s", "started_utc", "finished_utc", "run_root",
            "seconds", "updated_utc", "run_dir", "timing", "cached_calls", "cached", "sha256", "finished_s",
            "started_s"}


def _scrub(value):
  if isinstance(value, dict):
    return {k: _scrub(v) for k, v in value.items() if k not in VOLATILE}
  if isinstance(value, list):
    return [_scrub(v) for v in value]
  return value


def _contents(root: pathlib.Path) -> dict[str, object]:
  """Every file under `root`: JSON (and JSONL) parsed with clock fields dropped, anything else as bytes."""
  out = {}
  for path in sorted(p for p in root.rglob("*") if p.is_file()):
    rel = str(path.relative_to(root))
    if "/checkpoints/stage" in rel:  # orbax trees: random file names; the parameter hashes are compared
      continue
    if path.suffix == ".json":
      out[rel] = _scrub(json.loads(path.read_text()))
    elif path.suffix == ".jsonl":
      rows = [_scrub(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
      out[rel] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))  # arrival order is free
    else:
      out[rel] = path.read_bytes()
  return out


def _first_difference(a, b, where="") -> str | None:
  """Where two parsed files first differ (for the failure message)."""
  if type(a) is not type(b):
    return f"{where}: {a!r:.200} != {b!r:.200}"
  if isinstance(a, dict):
    for k in sorted(set(a) | set(b)):
      found = _first_difference(a.get(k), b.get(k), f"{where}.{k}")
      if found:
        return found
    return None
  if isinstance(a, list):
    if len(a) != len(b):
      return f"{where}: {len(a)} != {len(b)} entries"
    for i, (x, y) in enumerate(zip(a, b)):
      found = _first_difference(x, y, f"{where}[{i}]")
      if found:
        return found
    return None
  return None if a == b else f"{where}: {a!r:.200} != {b!r:.200}"


def _run(sim, root: pathlib.Path, concurrency: int, monkeypatch) -> dict[str, object]:
  monkeypatch.setenv("HIERAMAS_CACHE_DIR", str(root / "cache"))  # empty caches: embeddings, responses
  encoder_lib.get_encoder.cache_clear()
  spec = TableSpec(methods=METHODS, benchmarks=("mmlu_redux",), pools=("gpt-5-mini",), setting="main", seeds=(0,),
                   train_limit={"mmlu_redux": 6}, val_limit=3, test_limit=4, method_options=OPTIONS)

  async def go():
    endpoint = sim_endpoint(sim.base_url)
    cache = ResponseCache(root / "cache" / "responses")
    try:
      async with LLMClient(endpoint, cache=cache, max_concurrency=concurrency) as client:
        return await run_table(spec, {0: Backend(client, endpoint, cache)}, run_root=root / "runs", flags={},
                               max_queries=concurrency, progress=False)
    finally:
      cache.close()

  table = asyncio.run(go())
  encoder_lib.get_encoder.cache_clear()
  return {"table": _scrub(table), "files": _contents(root / "runs")}


def test_concurrency_1_and_64_from_empty_caches_give_the_same_results(tmp_path, monkeypatch):
  sim = start_sim_in_thread(SimConfig(seed=0))
  try:
    one = _run(sim, tmp_path / "c1", 1, monkeypatch)
    many = _run(sim, tmp_path / "c64", 64, monkeypatch)
  finally:
    sim.close()
  assert sorted(one["files"]) == sorted(many["files"]), set(one["files"]) ^ set(many["files"])
  differing = [_first_difference(one["files"][name], many["files"][name], name) for name in one["files"]
               if one["files"][name] != many["files"][name]]
  assert not differing, "\n".join(differing)
  assert one["table"] == many["table"]
  # Each cell names the commit whose code computed it (the same here: one checkout).
  assert all(len(c["computed_by"]) == 1 and "commit" in c["computed_by"][0] for c in one["table"]["cells"].values())
  fits = [json.dumps(v) for name, v in one["files"].items() if name.endswith("fit.json")]
  assert len(fits) == len(METHODS) and all('"params_sha256": "' in f for f in fits)  # parameters compared


def test_a_texts_embedding_does_not_depend_on_its_batch(tmp_path):
  # Padded to a batch's longest text, a vector moves in its last bits; each text is embedded alone.
  texts = ["Which gas do plants take in?",
           "A long question about chemistry, " * 12 + "which of the following is a noble gas?",
           "Solve x^2 - 5x + 6 = 0.", "Who wrote the Iliad?"]
  alone = np.stack([encoder_lib.SentenceEncoder(cache_path=tmp_path / f"alone{i}.sqlite").encode([t])[0]
                    for i, t in enumerate(texts)])
  together = encoder_lib.SentenceEncoder(cache_path=tmp_path / "together.sqlite").encode(texts)
  reversed_ = encoder_lib.SentenceEncoder(cache_path=tmp_path / "reversed.sqlite").encode(texts[::-1])[::-1]
  assert alone.tobytes() == together.tobytes() == reversed_.tobytes()
  # The model itself does differ by batch (what made this necessary): else this test proves nothing.
  batched = encoder_lib.SentenceEncoder(cache_path=tmp_path / "raw.sqlite", batch_size=64)._load()[0]
  assert batched.encode(texts).tobytes() != encoder_lib.encode_alone(batched, texts).tobytes()
  assert alone.tobytes() == encoder_lib.encode_alone(batched, texts).tobytes()


def test_embedding_on_several_threads_gives_the_same_bytes(tmp_path):
  # The pin runs each numeric call on one thread, so a cold run embeds on several threads at once, one model
  # copy each; a text is still in a pass of its own, so no vector may move.
  texts = ["Which gas do plants take in?", "Solve x^2 - 5x + 6 = 0.",
           "A long question about chemistry, " * 12 + "which of the following is a noble gas?",
           "Who wrote the Iliad?", "def add(a, b):\n    return a + b", "What is 7 times 8?", "Name a prime."]
  one = encoder_lib.SentenceEncoder(cache_path=tmp_path / "one.sqlite", threads=1)
  three = encoder_lib.SentenceEncoder(cache_path=tmp_path / "three.sqlite", threads=3)
  vecs = three.encode(texts)
  assert len(three._models) == 3 and len(one._models) == 0  # every copy embedded a share
  assert one.encode(texts).tobytes() == vecs.tobytes()
  # A batch size above 1 would let the split change what is padded together: it stays on one thread.
  assert encoder_lib.SentenceEncoder(cache_path=tmp_path / "b.sqlite", batch_size=8, threads=3).threads == 1
  with pytest.raises(encoder_lib.EncoderError, match="threads"):
    encoder_lib.SentenceEncoder(cache_path=tmp_path / "c.sqlite", threads=-1)
