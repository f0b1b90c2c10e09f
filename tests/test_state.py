"""State it can trust: every run-directory and cache file is checked on load; damage is one error naming
the file and the fix (exit 2), never a traceback, a silent change of the table or a replay."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import sqlite3

import jax.numpy as jnp
import numpy as np
import pytest

from hieramas_jax.errors import UserError
from hieramas_jax.experiment import runner
from hieramas_jax.experiment.evaluate import ITEMS_FILE, evaluate, load_done
from hieramas_jax.experiment.rundir import prepare_run_dir
from hieramas_jax.learn import checkpoint as checkpoint_lib
from hieramas_jax.learn import encoder as encoder_lib
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.methods.api import RunContext
from hieramas_jax.methods.common import ParamState
from hieramas_jax.methods.registry import make_method
from hieramas_jax.benchmarks.data import load_items
from mas_fakes import FakeClient


def _exit_line(capsys, fn) -> str:
  """The message of `fn`'s error, checked to be a user error: `cli.run_or_exit` prints it as one
  `error:` line and exits 2 (run_or_exit itself shuts logging down, so it is not called here)."""
  del capsys
  with pytest.raises(UserError) as e:
    fn()
  message = str(e.value)
  assert "\n" not in message and "Traceback" not in message, message
  return message


@pytest.fixture
def run_dir(tmp_path):
  client = FakeClient(lambda m, msg, s: "The answer is (A)")
  items = load_items("mmlu_redux")[:3]
  asyncio.run(evaluate(make_method("base"), items, RunContext(client, get_pool("gpt-5-mini")), run_dir=tmp_path,
                       progress=False))
  return tmp_path


def test_edited_results_are_detected_not_replayed(run_dir, capsys):
  path = run_dir / ITEMS_FILE
  lines = path.read_text().splitlines()
  assert len(load_done(run_dir)) == 3
  record = json.loads(lines[1])
  record["correct"] = not record["correct"]  # a flipped verdict would change the table silently
  path.write_text("\n".join([lines[0], json.dumps(record), lines[2]]) + "\n")
  line = _exit_line(capsys, lambda: load_done(run_dir))
  assert f"{path}:2" in line and "checksum" in line and "delete" in line


def test_wrong_types_are_an_error_naming_the_file(run_dir, capsys):
  path = run_dir / ITEMS_FILE
  lines = path.read_text().splitlines()
  record = json.loads(lines[0])
  record["cost_usd"] = "0.5"
  from hieramas_jax.experiment.rundir import sealed_line
  path.write_text(sealed_line(record) + "\n".join(lines[1:]) + "\n")  # a valid checksum over a wrong type
  line = _exit_line(capsys, lambda: load_done(run_dir))
  assert str(path) in line and "'cost_usd' is str" in line


def test_a_torn_middle_line_is_an_error_a_torn_last_line_is_dropped(run_dir, capsys):
  path = run_dir / ITEMS_FILE
  lines = path.read_text().splitlines()
  path.write_text(lines[0] + "\n" + lines[1][:40] + "\n" + lines[2] + "\n")
  line = _exit_line(capsys, lambda: load_done(run_dir))
  assert f"{path}:2" in line and "torn line can only be the last" in line
  path.write_text(lines[0] + "\n" + lines[1] + "\n" + lines[2][:40])  # killed mid-append
  assert len(load_done(run_dir)) == 2
  assert path.read_text() == lines[0] + "\n" + lines[1] + "\n"


@pytest.mark.parametrize("garbage", [b"", b"{not json", b"\xff\xfe", b"[1, 2"])
def test_garbage_config_and_fit_files(tmp_path, capsys, garbage):
  (tmp_path / "config.json").write_bytes(garbage)
  line = _exit_line(capsys, lambda: prepare_run_dir(tmp_path, {"a": 1}))
  assert str(tmp_path / "config.json") in line and "delete" in line
  (tmp_path / "fit.json").write_bytes(garbage)
  line = _exit_line(capsys, lambda: runner._fit_record(tmp_path / "fit.json", "delete it"))
  assert str(tmp_path / "fit.json") in line
  (tmp_path / "fit.json").write_text(json.dumps({"summary": {}, "training": {"calls": "many"}}))
  line = _exit_line(capsys, lambda: runner._fit_record(tmp_path / "fit.json", "delete it"))
  assert "expected an object of numbers" in line


def test_a_truncated_state_msgpack_is_an_error_naming_it(tmp_path, capsys):
  state = ParamState(tmp_path)
  template = {"params": {"w": jnp.ones((4, 4))}, "step": jnp.asarray(3)}
  state.save(3, template)
  data = state.path.read_bytes()
  state.path.write_bytes(data[: len(data) // 2])
  line = _exit_line(capsys, lambda: state.restore(template))
  assert str(state.path) in line


def test_a_garbage_embedding_cache_is_an_error_naming_it(tmp_path, capsys):
  path = tmp_path / "embeddings.sqlite"
  path.write_bytes(b"this is not a database " * 100)
  line = _exit_line(capsys, lambda: encoder_lib.EmbeddingCache(path))
  assert str(path) in line and "delete" in line
  other = tmp_path / "other.sqlite"
  cache = encoder_lib.EmbeddingCache(other)
  cache.put_many({"k": np.ones(4, np.float32)})
  with sqlite3.connect(other) as conn:
    conn.execute("UPDATE emb SET vec = ? WHERE key = 'k'", (b"\x00\x01\x02",))
  line = _exit_line(capsys, lambda: encoder_lib.EmbeddingCache(other).get_many(["k"]))
  assert "not a finite float32 vector" in line


def test_a_damaged_orbax_checkpoint_is_an_error_naming_it(tmp_path, capsys):
  tree = {"w": jnp.arange(6.0).reshape(2, 3)}
  checkpoint_lib.save_tree(tmp_path / "params", tree)
  np.testing.assert_array_equal(checkpoint_lib.restore_tree(tmp_path / "params", tree)["w"], tree["w"])
  for f in (tmp_path / "params").rglob("*"):
    if f.is_file():
      f.write_bytes(b"")
  line = _exit_line(capsys, lambda: checkpoint_lib.restore_tree(tmp_path / "params", tree))
  assert "params" in line and "refit" in line


def test_concurrent_fits_checkpoint_safely_in_one_process(tmp_path):
  # A table fits several methods at once, each saving through orbax from its own thread.
  def fit(k: int) -> float:
    ckpt = checkpoint_lib.Checkpointer(tmp_path / f"fit{k}")
    try:
      for step in range(1, 7):
        ckpt.save(step, {"w": jnp.full((256, 64), float(k * 10 + step)), "b": jnp.zeros(3)}, val_metric=float(step))
        checkpoint_lib.save_tree(tmp_path / f"scorer{k}", {"v": jnp.full((64,), float(step))})
      return float(ckpt.restore_best({"w": jnp.zeros((256, 64)), "b": jnp.zeros(3)})["w"][0, 0])
    finally:
      ckpt.close()

  with concurrent.futures.ThreadPoolExecutor(6) as pool:
    best = list(pool.map(fit, range(6)))
  assert best == [k * 10 + 6.0 for k in range(6)]
