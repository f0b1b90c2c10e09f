"""Test-wide settings: caches in a throwaway dir, W&B and Hugging Face offline."""

import os
import tempfile

# The real-server tier (tests/real: a real model server, minutes) runs only under `make test-real`.
collect_ignore = [] if os.environ.get("HIERAMAS_REAL_TIER") == "1" else ["real"]

os.environ.setdefault("HIERAMAS_CACHE_DIR", tempfile.mkdtemp(prefix="hieramas-test-cache-"))
os.environ["WANDB_MODE"] = "offline"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
