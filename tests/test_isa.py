"""The ISA pin: set before the numeric libraries load, honoured by them, recorded in provenance; and the bytes it
promises, the encoder's embeddings and a fitted scorer's parameters, equal on two CPUs of different ISA levels
(this AVX-512 CPU and an emulated AMD AVX2 one, QEMU user mode)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hieramas_jax import isa
from hieramas_jax.bench import isa as bench_isa
from hieramas_jax.experiment.provenance import provenance
from hieramas_jax.paths import REPO_DIR


@pytest.fixture
def clean_env(monkeypatch):
  for name in (*isa.VARIABLES, isa.LEVEL_ENV):
    monkeypatch.delenv(name, raising=False)
  return monkeypatch


def test_the_pin_sets_each_library_s_variable_keeps_the_user_s_and_extends_xla_flags(clean_env):
  assert isa.pin() == isa.LEVELS["avx2"]
  assert os.environ["ATEN_CPU_CAPABILITY"] == "avx2" and os.environ["OMP_NUM_THREADS"] == "1"
  assert os.environ["XLA_FLAGS"] == ("--xla_cpu_max_isa=AVX2 --xla_cpu_multi_thread_eigen=false "
                                     "--xla_cpu_enable_platform_dependent_math=false")
  for name in isa.VARIABLES:
    clean_env.delenv(name)
  clean_env.setenv("MKL_CBWR", "AVX2")
  clean_env.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
  set_now = isa.pin()
  assert "MKL_CBWR" not in set_now and os.environ["MKL_CBWR"] == "AVX2"  # the user's choice stands
  assert os.environ["XLA_FLAGS"] == ("--xla_force_host_platform_device_count=2 --xla_cpu_max_isa=AVX2 "
                                     "--xla_cpu_multi_thread_eigen=false --xla_cpu_enable_platform_dependent_math=false")
  assert "XLA_FLAGS" not in isa.pin()  # every flag of the pin already there: left alone
  clean_env.setenv(isa.LEVEL_ENV, "native")
  assert isa.pin() == {} and isa.embedding_tag() == ""
  clean_env.setenv(isa.LEVEL_ENV, "sse4.2")
  assert isa.embedding_tag() == "+isa-sse4.2-1thread"
  clean_env.setenv(isa.LEVEL_ENV, "avx9")
  with pytest.raises(isa.IsaError, match="HIERAMAS_ISA='avx9': known levels are avx2, sse4.2, native"):
    isa.level()


def test_provenance_records_the_level_the_variables_and_the_cpu():
  record = provenance(seed=0)["isa"]
  assert record["level"] == isa.level() and set(record["env"]) == set(isa.VARIABLES)
  cpu = isa.cpu_info()
  assert record["cpu"] == cpu and cpu["model"] and "sse4_2" in cpu["flags"]


def _fresh(code: str, **env) -> subprocess.CompletedProcess:
  base = {k: v for k, v in os.environ.items() if k not in (*isa.VARIABLES, isa.LEVEL_ENV)}
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_DIR,
                        env={**base, "PYTHONPATH": str(REPO_DIR), **env}, timeout=240, check=False)


@pytest.mark.skipif("avx2" not in isa.cpu_info().get("flags", []), reason="this CPU has no AVX2: the pin caps nothing")
def test_importing_the_suite_pins_torch_and_jax_before_they_load():
  code = ("import hieramas_jax, torch, jax, jax.numpy as jnp\n"
          "jnp.ones(3).sum().block_until_ready()\n"
          "print(torch.backends.cpu.get_cpu_capability())\n")
  pinned = _fresh(code)
  assert pinned.returncode == 0, pinned.stderr[-2000:]
  assert pinned.stdout.split()[-1] == "AVX2"  # ATen reads the variable the package set before torch loaded
  lower = _fresh(code, HIERAMAS_ISA="sse4.2")
  assert lower.stdout.split()[-1] == "DEFAULT"
  bad = _fresh("import hieramas_jax", HIERAMAS_ISA="avx9")
  assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
      "error: HIERAMAS_ISA='avx9': known levels are avx2, sse4.2, native"]


def test_the_pin_makes_xla_s_rsqrt_exact_so_no_cpu_s_approximation_table_reaches_the_bytes():
  """XLA:CPU lowers rsqrt and 1/sqrt to RSQRTPS plus a Newton step unless platform-dependent math is off;
  RSQRTPS's table is the CPU's own (it made the stage-2 scorer differ between two CPUs, issue 29). Pinned,
  both equal numpy's correctly rounded 1/sqrt on every value; unpinned they do not (the check can fail)."""
  code = ("import hieramas_jax, numpy as np, jax, jax.numpy as jnp\n"
          "x = np.arange(1, 1 << 16, dtype=np.float32) / np.float32(7)\n"
          "exact = (np.float32(1) / np.sqrt(x)).astype(np.float32)\n"
          "r = np.asarray(jax.jit(jax.lax.rsqrt)(x)); d = np.asarray(jax.jit(lambda v: 1.0 / jnp.sqrt(v))(x))\n"
          "print(int((r != exact).sum()), int((d != exact).sum()))\n")
  pinned = _fresh(code)
  assert pinned.returncode == 0, pinned.stderr[-2000:]
  assert pinned.stdout.split() == ["0", "0"]
  native = _fresh(code, HIERAMAS_ISA="native")
  assert native.returncode == 0, native.stderr[-2000:]
  assert int(native.stdout.split()[0]) > 0


@pytest.mark.slow
def test_each_level_is_honoured_and_reproducible_on_this_cpu():
  """The lower level gives other bytes than the pinned one (each library reads its variable: the pin is not
  a no-op), and the pinned level gives the same bytes twice."""
  avx2 = bench_isa.probe_in_process("avx2")
  again = bench_isa.probe_in_process("avx2")
  lower = bench_isa.probe_in_process("sse4.2")
  key = ("embeddings_sha256", "params_sha256", "jax_embeddings_sha256")
  assert [avx2[k] for k in key] == [again[k] for k in key]
  assert avx2["embeddings_sha256"] != lower["embeddings_sha256"]
  assert avx2["params_sha256"] != lower["params_sha256"]
  assert avx2["isa"]["torch_cpu_capability"] == "AVX2" and lower["isa"]["torch_cpu_capability"] == "DEFAULT"


@pytest.mark.slow
@pytest.mark.timeout(14400)
@pytest.mark.skipif(not bench_isa.can_emulate(),
                    reason="needs QEMU user mode (apt-get install qemu-user) and an AVX-512 CPU, so that the emulated "
                           "AMD EPYC-Rome (AVX2) is another ISA level than this one")
def test_pinned_bytes_are_equal_on_an_avx512_cpu_and_an_emulated_amd_avx2_cpu():
  key = ("embeddings_sha256", "params_sha256", "jax_embeddings_sha256")
  here = bench_isa.probe_in_process("avx2")
  there = bench_isa.probe_in_process("avx2", emulate=True, timeout_s=7200)
  assert there["isa"]["torch_cpu_capability"] == "AVX2"  # (QEMU user mode shows the host's /proc/cpuinfo)
  assert [here[k] for k in key] == [there[k] for k in key]
  # Unpinned the same two CPUs disagree: the check has the power to fail.
  native_here = bench_isa.probe_in_process("native")
  native_there = bench_isa.probe_in_process("native", emulate=True, fit=False, timeout_s=7200)
  assert native_here["embeddings_sha256"] != native_there["embeddings_sha256"]
