"""What the ISA pin (`hieramas_jax/isa.py`) keeps and what it costs: the bytes of the encoder's embeddings and
of one fitted classifier, at each level, and the time of each.

`probe()` is one process's answer: the sentence encoder embeds a fixed sample of MMLU-Redux queries joined
with their roles (one text per forward pass, as the suite does), and the HieraMAS stage-2 scorer
(`learn.stage2.fit`, the suite's own learned classifier) is fitted on those embeddings with seeded graphs and
labels. Both are hashed (sha256 of the float32 bytes). The level is chosen by the process's environment
(HIERAMAS_ISA), which is read when the package is imported, so each level is its own process: `run()` starts
one per level (and, when `qemu-x86_64` is installed, one under an emulated AMD EPYC-Rome: AVX2, no AVX-512,
another vendor), and writes the digests and timings to results/bench.json key `isa`.

The claim it checks (tests/test_isa.py): pinned, the digests are equal on the native AVX-512 CPU and on the
emulated AVX2 one; unpinned they differ.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Mapping, Sequence

import numpy as np

from hieramas_jax import isa
from hieramas_jax.paths import REPO_DIR

# The emulated second CPU: AMD, AVX2 and FMA, no AVX-512 (QEMU's TCG emulates up to AVX2).
QEMU = "qemu-x86_64"
QEMU_CPU = "EPYC-Rome"
PROBE_QUERIES = 8
PROBE_GRAPHS = 4
PROBE_EPOCHS = 3


def _digest(arrays: Sequence[Any]) -> str:
  h = hashlib.sha256()
  for a in arrays:
    h.update(np.ascontiguousarray(np.asarray(a, dtype=np.float32)).tobytes())
  return h.hexdigest()


def probe(n_queries: int = PROBE_QUERIES, graphs: int = PROBE_GRAPHS, epochs: int = PROBE_EPOCHS,
          seed: int = 0, fit: bool = True) -> dict[str, Any]:
  """Embeddings and a fitted stage-2 scorer at this process's pin: their sha256 and the seconds each took.
  `fit=False`: the embeddings only (the faster probe under emulation)."""
  # pylint: disable=import-outside-toplevel
  from hieramas_jax.benchmarks.data import load_items
  from hieramas_jax.learn.encoder import SentenceEncoder
  from hieramas_jax.mas.roles import role_description, roles_for

  items = load_items("mmlu_redux")[:n_queries]
  roles = roles_for("mmlu_redux")
  started = time.perf_counter()
  with tempfile.TemporaryDirectory() as tmp:  # a fresh cache: every vector computed here
    enc = SentenceEncoder(cache_path=os.path.join(tmp, "emb.sqlite"))
    query_emb = enc.encode([it.question for it in items])
    role_emb = enc.encode([role_description(r) for r in roles])
  embedded = time.perf_counter()
  with tempfile.TemporaryDirectory() as tmp:  # the JAX backend too: its bytes must not depend on the CPU either
    enc = SentenceEncoder(backend="jax", cache_path=os.path.join(tmp, "emb.sqlite"))
    jax_emb = [enc.encode([it.question for it in items]), enc.encode([role_description(r) for r in roles])]
  out = {"embeddings_sha256": _digest([query_emb, role_emb]), "embed_s": round(embedded - started, 3),
         "jax_embeddings_sha256": _digest(jax_emb), "jax_embed_s": round(time.perf_counter() - embedded, 3),
         "texts": len(items) + len(roles), "isa": isa.fingerprint()}
  embedded = time.perf_counter()
  if not fit:
    return out
  import jax  # pylint: disable=import-outside-toplevel
  from hieramas_jax.learn import stage2  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(seed)  # integer draws only: the same on every CPU
  n = len(roles)
  upper = np.triu(np.ones((n, n), dtype=bool), 1)
  adjacency = (rng.integers(0, 2, size=(n_queries, graphs, n, n)) == 1) & upper
  labels = rng.integers(0, 2, size=(n_queries, graphs)).astype(np.float32)
  labels[:, 0], labels[:, 1] = 1.0, 0.0  # every query has a positive and a negative
  data = stage2.Stage2Batch(query_emb=query_emb, role_emb=role_emb, adjacency=adjacency,
                            node_mask=np.ones((n_queries, graphs, n), dtype=bool), labels=labels,
                            label_mask=np.ones((n_queries, graphs), dtype=bool), pos_weight=np.float32(1.0))
  config = stage2.Stage2Config(learning_rate=1e-3, weight_decay=1e-4, epochs=epochs, batch_size=4, patience=epochs,
                               val_fraction=0.25)
  params, history = stage2.fit(data, jax.random.PRNGKey(seed), config)
  return {**out, "params_sha256": _digest(jax.tree_util.tree_leaves(params)),
          "first_train_loss": float(history[0]["train_loss"]) if history else None,
          "fit_s": round(time.perf_counter() - embedded, 3)}


PROBE_CODE = ("import json, sys\nfrom hieramas_jax.bench.isa import probe\n"
              "print('PROBE ' + json.dumps(probe(fit=sys.argv[1] == 'fit')), flush=True)\n")


def probe_in_process(level: str, *, emulate: bool = False, fit: bool = True, timeout_s: float = 3600) -> dict[str, Any]:
  """`probe()` in a fresh process at `level` ("avx2", "sse4.2" or "native"), natively or under QEMU's EPYC-Rome.

  Every pin variable is cleared first, so the level alone decides (a variable left in this process's
  environment would otherwise win). Raises RuntimeError with the process's last output if it fails.
  """
  env = {k: v for k, v in os.environ.items() if k not in isa.VARIABLES}
  env.update({isa.LEVEL_ENV: level, "PYTHONPATH": str(REPO_DIR), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
  cmd = [sys.executable, "-c", PROBE_CODE, "fit" if fit else "embed"]
  if emulate:
    cmd = [QEMU, "-cpu", QEMU_CPU] + cmd
  proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO_DIR, timeout=timeout_s, check=False)
  lines = [l for l in proc.stdout.splitlines() if l.startswith("PROBE ")]
  if proc.returncode != 0 or not lines:
    # QEMU warns once per thread about CPUID bits it does not emulate: not the error.
    err = "\n".join(l for l in proc.stderr.splitlines() if not l.startswith("qemu-x86_64: warning"))
    raise RuntimeError(f"probe at {level}{' (emulated)' if emulate else ''} failed ({proc.returncode}): {err[-2000:]}")
  return json.loads(lines[-1][len("PROBE "):])


def can_emulate() -> bool:
  """QEMU user mode is installed and this CPU has AVX-512 (else the emulated CPU is no other level)."""
  return shutil.which(QEMU) is not None and "avx512f" in (isa.cpu_info().get("flags") or [])


def run(*, out: str, flags: Mapping[str, Any], emulate: bool = True, emulate_fit: bool = False,
        reps: int = 1) -> dict[str, Any]:
  """Probes each level natively (`reps` times, timings kept as the median), and avx2 and native under
  emulation when possible (the embeddings only unless `emulate_fit`); writes results/bench.json key `isa`."""
  # pylint: disable=import-outside-toplevel
  from hieramas_jax.bench.results import load_average, machine, publish
  from hieramas_jax.experiment.provenance import provenance
  load_before = load_average()
  native: dict[str, Any] = {}
  for level in ("native", "avx2", "sse4.2"):
    runs = [probe_in_process(level) for _ in range(reps)]
    native[level] = {**runs[0], "embed_s": float(np.median([r["embed_s"] for r in runs])),
                     "fit_s": float(np.median([r["fit_s"] for r in runs])),
                     "jax_embed_s": float(np.median([r["jax_embed_s"] for r in runs])),
                     "same_bytes_every_rep": len({(r["embeddings_sha256"], r["params_sha256"],
                                                   r["jax_embeddings_sha256"]) for r in runs}) == 1}
  emulated: dict[str, Any] = {}
  if emulate and can_emulate():
    for level in ("avx2", "native"):
      try:
        emulated[level] = probe_in_process(level, emulate=True, fit=emulate_fit)
      except (RuntimeError, subprocess.TimeoutExpired) as e:  # said in the record, not lost with the rest
        emulated[level] = {"error": str(e).splitlines()[0][:300]}
  key = ("embeddings_sha256", "jax_embeddings_sha256") + (("params_sha256",) if emulate_fit else ())
  record = {
      "what": "sha256 of the encoder's embeddings of 8 MMLU-Redux queries and the benchmark's roles (torch, the "
              "default backend, and jax), and of the stage-2 scorer fitted on the torch ones (3 epochs), per ISA level; natively and under QEMU's emulated AMD "
              f"{QEMU_CPU} (AVX2, no AVX-512) where installed ('compared': what the emulated probe computed)",
      "native": native, "emulated": emulated,
      "compared": list(key),
      "pinned_equal_across_cpus": (all(native["avx2"][k] == emulated["avx2"][k] for k in key)
                                   if key[0] in emulated.get("avx2", {}) else None),
      "unpinned_equal_across_cpus": (all(native["native"][k] == emulated["native"][k] for k in key)
                                     if key[0] in emulated.get("native", {}) else None),
      "pin_cost": {"embed": round(native["avx2"]["embed_s"] / native["native"]["embed_s"], 3),
                   "jax_embed": round(native["avx2"]["jax_embed_s"] / native["native"]["jax_embed_s"], 3),
                   "fit": round(native["avx2"]["fit_s"] / native["native"]["fit_s"], 3)},
      "machine": machine(load_before, note="2 shared cores; the emulated probe's timings are QEMU's, not a CPU's"),
      "provenance": provenance(seed=0, benchmarks=("mmlu_redux",), flags=flags),
  }
  publish(out, "isa", record)
  return record
