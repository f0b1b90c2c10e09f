"""Where things live. One place, so no module guesses a path of its own."""

from __future__ import annotations

import os
import pathlib

PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
DATA_DIR = PACKAGE_DIR / "data"
BENCHMARK_DATA_DIR = DATA_DIR / "benchmarks"
SPLITS_DIR = DATA_DIR / "splits"
REPO_DIR = PACKAGE_DIR.parent
RESULTS_DIR = REPO_DIR / "results"


def cache_dir() -> pathlib.Path:
  """Root of on-disk caches (responses, grades, embeddings).

  `HIERAMAS_CACHE_DIR` overrides it so tests and CI can use a throwaway directory.
  """
  root = os.environ.get("HIERAMAS_CACHE_DIR")
  path = pathlib.Path(root) if root else REPO_DIR / ".cache"
  path.mkdir(parents=True, exist_ok=True)
  return path
