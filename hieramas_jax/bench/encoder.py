"""The sentence encoder's torch path against the ONNX Runtime backends, same weights
(`results/bench.json` key `encoder`).

The sample is fixed: `per_benchmark` query-role texts of each benchmark's training split (the texts
learned methods embed, f(Q, r, desc(r))), plus the pool's LLM profiles and the role texts. Each backend
embeds the whole sample through `SentenceEncoder.encode` with an empty embedding cache (every text a miss:
the cold-cell case) after a warm-up on other texts (model load and, for ONNX, the one-time export are not
timed); the backends are interleaved over `reps` rounds and the best round is reported (the least
disturbed by other load on a shared machine; the medians are written too).

Agreement: cosine of each backend's embedding to the torch one, on every text (`min_cosine`), and the
greedy choices of a fixed policy checkpoint (the LLM-selection policy initialised from PRNGKey(seed), no
checkpoint being committed) on the MMLU-Redux texts under each backend's embeddings.

Goals (issue 11): >= 3x today's texts/s on 2 cores, min cosine >= 0.99, the same policy choices.

`run_composition` measures instead what embedding each text in a forward pass of its own costs (the
suite's path since issue 16: a vector then does not depend on its batch) against one batched call per
chunk (the path before), torch backend, interleaved rounds, best round; key `encoder_composition`,
with how many vectors of the sample the batched path changes and by how much.

`write_reference` writes the test's stored reference embeddings (tests/data/encoder_reference).
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import tempfile
import time
from typing import Any, Mapping, Sequence

import numpy as np

from hieramas_jax.bench.results import load_average, machine, publish, update_json_key
from hieramas_jax.benchmarks.data import BENCHMARKS
from hieramas_jax.benchmarks.splits import load_split
from hieramas_jax.errors import UserError
from hieramas_jax.experiment.provenance import provenance
from hieramas_jax.fileio import atomic_write_json
from hieramas_jax.learn import encoder as encoder_lib
from hieramas_jax.llm.registry import get_model, get_pool
from hieramas_jax.mas import roles as roles_lib

KEY = "encoder"
COMPOSITION_KEY = "encoder_composition"
MACHINE_NOTE = "2 cores shared with other work; every rate drops under load"
WARMUP = tuple(f"warm-up text {i}: the quick brown fox" for i in range(16))

# Edge cases the reference sample adds to sampled texts: tokenizer and truncation paths.
EDGE_TEXTS = ("", "   leading and trailing whitespace   ", "Unicode: \u00e9t\u00e9, \u2013, \u03c0 r\u00b2, \U0001F600",
              "def f(x):\n    return x ** 2  # code\n", "word " * 400)


def sample_texts(per_benchmark: int, seed: int, pool: str) -> list[tuple[str, str]]:
  """(tag, text) pairs: query-role texts of training items (tag: benchmark), profiles, role texts."""
  from hieramas_jax.learn.policy import query_role_text  # pylint: disable=import-outside-toplevel
  out = []
  for k, benchmark in enumerate(BENCHMARKS):
    items = load_split(benchmark, "train")
    rng = np.random.default_rng([seed, k])
    role_names = roles_lib.roles_for(benchmark)
    for n, i in enumerate(rng.choice(len(items), size=min(per_benchmark, len(items)), replace=False)):
      role = role_names[n % len(role_names)]
      out.append((benchmark, query_role_text(items[int(i)].question, role, roles_lib.role_description(role))))
  for model in get_pool(pool).models:
    out.append(("profile", get_model(model).profile))
  for benchmark in BENCHMARKS:
    for role in roles_lib.roles_for(benchmark):
      out.append(("role", f"{role}: {roles_lib.role_description(role)}"))
  return out


def _encode_timed(backend: str, texts: list[str], warmup: list[str]) -> tuple[np.ndarray, float]:
  with tempfile.TemporaryDirectory(prefix="bench-encoder-") as tmp:
    enc = encoder_lib.SentenceEncoder(backend=backend, cache_path=pathlib.Path(tmp) / "emb.sqlite")
    enc.encode(warmup)
    start = time.perf_counter()
    vecs = enc.encode(texts)
    elapsed = time.perf_counter() - start
    assert enc.misses == len(warmup) + len(set(texts))
  return vecs, len(texts) / elapsed


def policy_agreement(reference: tuple[np.ndarray, np.ndarray], other: tuple[np.ndarray, np.ndarray],
                     seed: int) -> dict:
  """Greedy choices of a fixed policy (initialised from `seed`) under two embeddings of the same
  (MMLU-Redux texts, profiles)."""
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  from hieramas_jax.learn import policy as policy_lib  # pylint: disable=import-outside-toplevel
  num_roles = len(roles_lib.roles_for("mmlu_redux"))

  def inputs(vecs):
    # The sampled MMLU-Redux texts cycle through the roles: each block of R texts is one policy query.
    texts, profiles = vecs
    usable = len(texts) // num_roles * num_roles
    qr = texts[:usable].reshape(-1, num_roles, texts.shape[1])
    return policy_lib.PolicyInputs(jnp.asarray(qr), jnp.asarray(profiles), jnp.ones((num_roles, 3), bool))

  params = policy_lib.init_params(jax.random.PRNGKey(seed), inputs(reference))
  a = np.asarray(policy_lib.greedy_choices(params, inputs(reference)))
  b = np.asarray(policy_lib.greedy_choices(params, inputs(other)))
  return {"positions": int(a.size), "same_choice_fraction": round(float((a == b).mean()), 4),
          "same_configuration_fraction": round(float((a == b).all(axis=(1, 2)).mean()), 4),
          "queries": int(a.shape[0]), "distinct_choices_under_torch": int(len(np.unique(a)))}


def _torch_threads() -> int:
  import torch  # pylint: disable=import-outside-toplevel
  return torch.get_num_threads()


def write_reference(directory: pathlib.Path, *, seed: int, pool: str) -> None:
  """The test's fixed sample: 8 sampled texts per benchmark, a few profiles, edge cases; torch embeddings."""
  texts = [t for _, t in sample_texts(8, seed, pool)][:24] + [get_model(m).profile for m in
                                                                get_pool(pool).models[:3]] + list(EDGE_TEXTS)
  with tempfile.TemporaryDirectory() as tmp:
    vecs = encoder_lib.SentenceEncoder(backend="torch", cache_path=pathlib.Path(tmp) / "e.sqlite").encode(texts)
  directory.mkdir(parents=True, exist_ok=True)
  np.save(directory / "embeddings.npy", vecs.astype(np.float32))
  atomic_write_json(directory / "texts.json", {
      "texts": texts, "model_sha256": encoder_lib.DEFAULT_MODEL_SHA256, "backend": "torch",
      "made_by": f"python experiments/bench_encoder.py --write_reference={directory}"})


BATCHED_SIZE = 64  # the torch path's batch before issue 16


def composition_cost(texts: list[str], warmup: list[str], reps: int) -> dict:
  """texts/s of one text per forward pass (today) and of batched calls (before), same torch model."""
  with tempfile.TemporaryDirectory(prefix="bench-encoder-") as tmp:
    one = encoder_lib.SentenceEncoder(backend="torch", cache_path=pathlib.Path(tmp) / "a.sqlite")._load()[0]
    batched = encoder_lib.SentenceEncoder(backend="torch", cache_path=pathlib.Path(tmp) / "b.sqlite",
                                          batch_size=BATCHED_SIZE)._load()[0]
  one.encode(warmup)
  batched.encode(warmup)
  paths = {"one_text_per_pass": lambda: one.encode(texts), "batched": lambda: batched.encode(texts)}
  rates: dict[str, list[float]] = {name: [] for name in paths}
  vecs = {}
  for _ in range(reps):
    for name, run in paths.items():
      start = time.perf_counter()
      vecs[name] = np.asarray(run(), np.float32)
      rates[name].append(len(texts) / (time.perf_counter() - start))
      print(f"{name}: {rates[name][-1]:.1f} texts/s", flush=True)
  changed = np.any(vecs["batched"] != vecs["one_text_per_pass"], axis=1)
  best = {name: max(r) for name, r in rates.items()}
  return {"texts_per_s": {name: round(v, 2) for name, v in best.items()},
          "rounds": {name: [round(x, 2) for x in r] for name, r in rates.items()},
          "slowdown": round(best["batched"] / best["one_text_per_pass"], 3),
          "batch_size": BATCHED_SIZE, "texts": len(texts),
          "vectors_changed_by_batching": int(changed.sum()),
          "max_abs_difference": float(np.max(np.abs(vecs["batched"] - vecs["one_text_per_pass"]))),
          "note": ("slowdown = batched texts/s over one-text-per-pass texts/s, best of interleaved rounds, every "
                   "text a cache miss; a cached text costs neither")}


def measure(*, per_benchmark: int, reps: int, backends: Sequence[str], seed: int, pool: str) -> dict:
  """The `encoder` record without its provenance; `backends` start with torch (the reference)."""
  if backends[0] != "torch":
    raise UserError("--backends must start with torch (today's path, the reference)")
  load_before = os.getloadavg()
  sample = sample_texts(per_benchmark, seed, pool)
  texts = [t for _, t in sample]
  warmup = list(WARMUP)
  rates: dict[str, list[float]] = {b: [] for b in backends}
  vecs: dict[str, np.ndarray] = {}
  for _ in range(reps):
    for backend in backends:
      vecs[backend], rate = _encode_timed(backend, texts, warmup)
      rates[backend].append(rate)
      print(f"{backend}: {rate:.1f} texts/s", flush=True)
  torch_rate = max(rates["torch"])
  mmlu_rows = [i for i, (tag, _) in enumerate(sample) if tag == "mmlu_redux"]
  profile_rows = [i for i, (tag, _) in enumerate(sample) if tag == "profile"]
  by_backend = {}
  for backend in backends:
    cos = np.sum(vecs[backend] * vecs["torch"], axis=1)
    by_backend[backend] = {
        "texts_per_s": round(max(rates[backend]), 2), "texts_per_s_median": round(statistics.median(rates[backend]), 2),
        "rounds": [round(r, 2) for r in rates[backend]], "speedup": round(max(rates[backend]) / torch_rate, 2),
        "min_cosine": round(float(cos.min()), 6), "mean_cosine": round(float(cos.mean()), 6),
        "policy": policy_agreement((vecs["torch"][mmlu_rows], vecs["torch"][profile_rows]),
                                   (vecs[backend][mmlu_rows], vecs[backend][profile_rows]), seed)}
  candidates = [b for b in backends if b != "torch"]
  accurate = [b for b in candidates if by_backend[b]["min_cosine"] >= 0.99
              and by_backend[b]["policy"]["same_choice_fraction"] == 1.0]
  best = max(accurate, key=lambda b: by_backend[b]["texts_per_s"]) if accurate else None
  out = {
      "old_texts_per_s": by_backend["torch"]["texts_per_s"],
      "new_backend": best,
      "new_texts_per_s": by_backend[best]["texts_per_s"] if best else None,
      "speedup": by_backend[best]["speedup"] if best else None,
      "min_cosine": by_backend[best]["min_cosine"] if best else None,
      "goals": {"speedup": 3.0, "min_cosine": 0.99, "same_choice_fraction": 1.0},
      "met": bool(best and by_backend[best]["speedup"] >= 3.0),
      "default_backend": encoder_lib.DEFAULT_BACKEND,
      "backends": by_backend,
      "sample": {"texts": len(texts), "per_benchmark": per_benchmark,
                 "mean_chars": round(float(np.mean([len(t) for t in texts])), 1)},
      "threads": {"torch": _torch_threads(), "onnxruntime_intra_op": os.cpu_count()},
      "note": ("new_backend = the fastest backend meeting cosine >= 0.99 and identical policy choices; "
               "texts_per_s = best of the interleaved rounds; every text a cache miss"),
  }
  out["machine"] = machine(load_before, MACHINE_NOTE)
  return out


def run(*, per_benchmark: int, reps: int, backends: Sequence[str], seed: int, pool: str, out: str,
        flags: Mapping[str, Any]) -> dict:
  """Measures, writes key `encoder` of `out` (provenance: `flags`) and prints the headline figures."""
  record = measure(per_benchmark=per_benchmark, reps=reps, backends=backends, seed=seed, pool=pool)
  record["provenance"] = provenance(seed=seed, benchmarks=list(BENCHMARKS), flags=flags)
  publish(out, KEY, record)
  print(json.dumps({k: record[k] for k in ("old_texts_per_s", "new_backend", "new_texts_per_s", "speedup",
                                           "min_cosine")}))
  return record


def run_composition(*, per_benchmark: int, reps: int, seed: int, pool: str, out: str,
                    flags: Mapping[str, Any]) -> dict:
  """One text per pass against batched calls; writes key `encoder_composition` of `out` (no W&B run, as
  before) and prints the headline figures."""
  texts = [t for _, t in sample_texts(per_benchmark, seed, pool)]
  record = composition_cost(texts, list(WARMUP), reps)
  record["machine"] = {"cpu_count": os.cpu_count(), "load_average": load_average(),
                       "note": MACHINE_NOTE}
  record["provenance"] = provenance(seed=seed, benchmarks=list(BENCHMARKS), flags=flags)
  update_json_key(out, COMPOSITION_KEY, record)
  print(json.dumps({k: record[k] for k in ("texts_per_s", "slowdown", "vectors_changed_by_batching")}))
  return record
