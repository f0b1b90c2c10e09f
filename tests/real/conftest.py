"""The real-server tier: a real OpenAI-compatible server (transformers serve, SmolLM2-135M-Instruct) on
loopback, started once for the session. Run with `make test-real` (CI runs it after `make test`).

Nothing here is skipped: where the server cannot be prepared or started, the tier fails and says why
(a safety net that cannot engage must fail loudly)."""

import os
import pathlib
import sys
import tempfile

import pytest

os.environ.setdefault("HIERAMAS_CACHE_DIR", tempfile.mkdtemp(prefix="hieramas-real-cache-"))
os.environ["WANDB_MODE"] = "offline"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/: the shared test helpers


@pytest.fixture(scope="session")
def real_server():
  from hieramas_jax.llm import local_server
  # The converted model is kept between runs on this machine (never a native build): .cache/real-server.
  model_root = pathlib.Path(os.environ.get("HIERAMAS_REAL_SERVER_DIR",
                                           pathlib.Path(__file__).resolve().parents[2] / ".cache" / "real-server"))
  with local_server.start_server(local_server.prepare_model(model_root)) as server:
    yield server
