"""The numeric kernels' instruction set, pinned before any numeric library loads: one seed, the same bytes on any
x86-64 CPU with AVX2.

Why: PyTorch (ATen's vectorised kernels, MKL's GEMM, oneDNN), XLA's generated code and numpy's SIMD loops all
pick their kernels from the CPU they run on. An AVX-512 machine sums a dot product in 16-wide lanes, an AVX2
one in 8-wide lanes, MKL takes other code paths on AMD than on Intel: the last bits of the encoder's
embeddings and of every training step differ, and sampling amplifies them (issue 29: 10 of 72 Table 1 cells
differed on an AMD EPYC from the committed ones made on an AVX-512 Xeon).

`pin()` (called by `hieramas_jax/__init__.py`, i.e. before any module of the suite, and so before torch,
jax or numpy, is imported through it) caps every library at one level, by the environment variables each
reads when it first computes:

  torch / ATen        ATEN_CPU_CAPABILITY=avx2        ATen's own vector kernels (default: the CPU's widest)
  MKL (torch's GEMM)  MKL_CBWR=COMPATIBLE             MKL's cross-vendor conditional numerical reproducibility
                                                      branch (MKL_CBWR=AVX2 binds Intel CPUs only: AMD took AUTO)
  oneDNN              DNNL_MAX_CPU_ISA=AVX2           oneDNN's JIT kernels
  XLA (jax)           XLA_FLAGS+=--xla_cpu_max_isa=AVX2   the instructions XLA:CPU may emit
                      XLA_FLAGS+=--xla_cpu_enable_platform_dependent_math=false   an exact 1/sqrt, not RSQRTPS
  numpy               NPY_DISABLE_CPU_FEATURES=...    numpy's AVX-512 dispatch targets
  threads             OMP_NUM_THREADS=1, MKL_NUM_THREADS=1, XLA_FLAGS+=--xla_cpu_multi_thread_eigen=false
                      (a sum split over more threads is another sum: same bytes on any core count)

What is shown and what is not (README, "Same bytes on any CPU"; results/bench.json key `isa`): each library
honours its variable on an AVX-512 Xeon. Under an emulated AMD EPYC-Rome (AVX2; QEMU user mode) the embeddings
made with MKL_CBWR=AVX2 differed from the Xeon's (MKL's vendor dispatch); with COMPATIBLE they are equal
(sha256 04169617... on both, measured 2026-12-03; `tests/test_isa.py`). The stage-2 scorer fitted on them
was equal there only once platform-dependent math was off too (params f7486b17..., measured 2026-12-04 on an
AVX-512 AMD EPYC host against the emulated EPYC-Rome). COMPATIBLE costs speed: MiniLM
embedding took about 2.3x as long as with AVX2 (1,000 MMLU-Redux questions, one thread, a loaded 2-core machine;
embeddings are cached, so a table pays it once per text). Not promised: CPUs without AVX2,
other library versions (requirements.lock pins them), a thread count set by the user.

`HIERAMAS_ISA=native` turns the pin off (each library uses the CPU's widest kernels: faster where AVX-512
helps, bytes differ across CPUs); a variable the user set is never overridden; `fingerprint()` records what
was in force, with the CPU model and flags, in every result's provenance.

At the bottom of the package: imports only `errors` of it, and no numeric library.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from hieramas_jax.errors import UserError

LEVEL_ENV = "HIERAMAS_ISA"
DEFAULT_LEVEL = "avx2"
NATIVE = "native"
XLA_FLAG = "--xla_cpu_max_isa"
# numpy's dispatch targets above AVX2, in numpy 2.x's names and 1.x's (a name a version lacks is ignored).
_NUMPY_ABOVE_AVX2 = ("X86_V4 AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL "
                     "AVX512_SPR")
_NUMPY_ABOVE_SSE42 = "X86_V3 AVX AVX2 FMA3 F16C " + _NUMPY_ABOVE_AVX2

# Level -> the environment each library reads. "sse4.2" is the lower level the tests compare against.
# One thread per numeric call at every level: a GEMM split over more threads sums in another order (the
# encoder's embeddings differed between 1 and 2 OpenMP threads here), and Ray gives each worker
# OMP_NUM_THREADS=<its CPUs> while one process uses every core. Cells run concurrently, so the cores stay busy.
_ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false"
# XLA:CPU lowers rsqrt (and 1/sqrt, which it rewrites to rsqrt) to the CPU's approximate reciprocal square
# root instruction plus one Newton step: RSQRTPS's table differs between vendors (and QEMU computes it
# exactly), so GCN normalisations and LayerNorms differed in the last bits on an AMD and an Intel CPU.
# Off, XLA emits a correctly rounded 1/sqrt (measured: equal to numpy's 1/sqrt on both; exp, log, tanh and
# dots are unchanged). Issue 29.
XLA_EXACT_MATH = "--xla_cpu_enable_platform_dependent_math=false"
LEVELS: dict[str, dict[str, str]] = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE", "DNNL_MAX_CPU_ISA": "AVX2",
             "NPY_DISABLE_CPU_FEATURES": _NUMPY_ABOVE_AVX2, **_ONE_THREAD,
             "XLA_FLAGS": f"{XLA_FLAG}=AVX2 {XLA_ONE_THREAD} {XLA_EXACT_MATH}"},
    "sse4.2": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "SSE4_2", "DNNL_MAX_CPU_ISA": "SSE41",
               "NPY_DISABLE_CPU_FEATURES": _NUMPY_ABOVE_SSE42, **_ONE_THREAD,
               "XLA_FLAGS": f"{XLA_FLAG}=SSE4_2 {XLA_ONE_THREAD} {XLA_EXACT_MATH}"},
}
# The variables `pin` sets and `fingerprint` records.
VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "DNNL_MAX_CPU_ISA", "NPY_DISABLE_CPU_FEATURES", "OMP_NUM_THREADS",
             "MKL_NUM_THREADS", "XLA_FLAGS")
# CPU flags that decide which kernels the libraries may choose (recorded, not the whole /proc/cpuinfo line).
_CPU_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
              "avx512_bf16", "avx512_fp16", "amx_tile")
_NUMERIC_MODULES = ("numpy", "torch", "jax", "jaxlib")
_LOADED_BEFORE_PIN: list[str] = []


class IsaError(UserError, ValueError):
  """HIERAMAS_ISA names no known level: the suite cannot know which bytes to make."""


def level() -> str:
  """The level asked for: HIERAMAS_ISA, default "avx2"; "native" turns the pin off."""
  value = os.environ.get(LEVEL_ENV, DEFAULT_LEVEL).strip().lower() or DEFAULT_LEVEL
  if value != NATIVE and value not in LEVELS:
    raise IsaError(f"{LEVEL_ENV}={value!r}: known levels are {', '.join([*LEVELS, NATIVE])}")
  return value


def pin() -> dict[str, str]:
  """Sets each library's variable for `level()` unless the user set it; returns what it set.

  XLA_FLAGS is extended, not replaced: each of the pin's XLA flags is added unless it is already there.
  Must run before the libraries compute anything: each reads its variable once.
  """
  global _LOADED_BEFORE_PIN  # pylint: disable=global-statement
  _LOADED_BEFORE_PIN = [m for m in _NUMERIC_MODULES if m in sys.modules]
  wanted = level()
  if wanted == NATIVE:
    return {}
  set_now = {}
  for name, value in LEVELS[wanted].items():
    current = os.environ.get(name)
    if name == "XLA_FLAGS":
      present = {f.split("=")[0] for f in (current or "").split()}
      missing = [f for f in value.split() if f.split("=")[0] not in present]
      if not missing:
        continue
      value = " ".join([current] * bool(current) + missing)
    elif current is not None:
      continue
    os.environ[name] = value
    set_now[name] = value
  return set_now


def cpu_info() -> dict[str, Any]:
  """The CPU's vendor, model and the flags that choose kernels (from /proc/cpuinfo; {} where there is none)."""
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      text = f.read()
  except OSError:
    return {}
  fields: dict[str, str] = {}
  for line in text.splitlines():
    if not line.strip():
      break  # the first processor's block is enough
    key, _, value = line.partition(":")
    fields.setdefault(key.strip(), value.strip())
  flags = set(fields.get("flags", "").split())
  return {"vendor": fields.get("vendor_id"), "model": fields.get("model name"),
          "flags": [f for f in _CPU_FLAGS if f in flags]}


def fingerprint() -> dict[str, Any]:
  """What decided this process's numeric kernels: the level, the variables in force, the CPU, and the
  kernel level torch chose when torch is loaded (for provenance and results/bench.json)."""
  out: dict[str, Any] = {"level": level(), "env": {n: os.environ.get(n) for n in VARIABLES}, "cpu": cpu_info()}
  if _LOADED_BEFORE_PIN:  # imported before the suite: their variables may have been read too early
    out["loaded_before_pin"] = list(_LOADED_BEFORE_PIN)
  torch = sys.modules.get("torch")
  if torch is not None:
    out["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
  return out


def embedding_tag() -> str:
  """Appended to cached embeddings' model id: vectors made at another level are other bytes, never mixed."""
  wanted = level()
  return "" if wanted == NATIVE else f"+isa-{wanted}-1thread"
