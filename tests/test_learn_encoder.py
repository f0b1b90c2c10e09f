"""Sentence encoder: the real bundled weights, the checksum guard, the on-disk cache."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from hieramas_jax.learn import encoder


def test_checksum_rejects_other_weights(tmp_path):
  (tmp_path / "model.safetensors").write_bytes(b"not the real weights")
  with pytest.raises(encoder.ChecksumError, match="sha256"):
    encoder.verify_checksum(tmp_path)
  with pytest.raises(encoder.ChecksumError, match="does not exist"):
    encoder.verify_checksum(tmp_path / "missing")


def test_bundled_weights_pass_checksum():
  encoder.verify_checksum(encoder.default_model_path())  # raises if the package ships other weights


def test_real_embeddings_and_cache_hit(tmp_path):
  cache = tmp_path / "emb.sqlite"
  enc = encoder.SentenceEncoder(cache_path=cache)
  texts = ["Solve the quadratic equation x^2 - 5x + 6 = 0.",
           "Find the roots of the polynomial x squared minus five x plus six.",
           "The museum opens at nine on Sundays."]
  vecs = enc.encode(texts + [texts[0]])  # a repeated text is embedded once
  assert vecs.shape == (4, encoder.EMBEDDING_DIM) and vecs.dtype == np.float32
  np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
  related, unrelated = float(vecs[0] @ vecs[1]), float(vecs[0] @ vecs[2])
  assert related > unrelated + 0.3, (related, unrelated)
  np.testing.assert_array_equal(vecs[0], vecs[3])
  assert enc.misses == 3

  # A second encoder over the same cache file answers without ever loading the model.
  again = encoder.SentenceEncoder(cache_path=cache)
  np.testing.assert_array_equal(again.encode(texts), vecs[:3])
  assert (again.hits, again.misses) == (3, 0)
  assert again._models == []
  assert len(again.cache) == 3


def test_encode_rejects_a_bare_string(tmp_path):
  enc = encoder.SentenceEncoder(cache_path=tmp_path / "emb.sqlite")
  with pytest.raises(encoder.EncoderError, match="sequence of texts"):
    enc.encode("one string")


REFERENCE = pathlib.Path(__file__).parent / "data" / "encoder_reference"


def _reference():
  """The fixed sample (query-role texts of each benchmark, profiles, edge cases) and today's torch
  embeddings of it, made by `python experiments/bench_encoder.py --write_reference=tests/data/encoder_reference`."""
  meta = json.loads((REFERENCE / "texts.json").read_text())
  assert meta["model_sha256"] == encoder.DEFAULT_MODEL_SHA256 and meta["backend"] == "torch"
  return meta["texts"], np.load(REFERENCE / "embeddings.npy")


# Slow (each backend's model built afresh: 1.5-2 minutes apiece on a loaded 2-core machine); the fast tier
# keeps test_real_embeddings_and_cache_hit (torch) and the checksum tests; the ONNX backend is checked here only.
@pytest.mark.slow
@pytest.mark.parametrize("backend, min_cosine", [("torch", 0.99999), ("onnx", 0.9999)])
def test_backends_agree_with_the_stored_reference_embeddings(tmp_path, backend, min_cosine):
  texts, reference = _reference()
  enc = encoder.SentenceEncoder(backend=backend, cache_path=tmp_path / "emb.sqlite")
  vecs = enc.encode(texts)
  cosine = np.sum(vecs * reference, axis=1)
  assert cosine.min() >= min_cosine, (backend, float(cosine.min()), int(cosine.argmin()))
  np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
  assert enc.misses == len(set(texts))


def test_backend_choice_and_cache_keys(tmp_path):
  assert encoder.split_backend("all-MiniLM-L6-v2:onnx") == ("all-MiniLM-L6-v2", "onnx")
  assert encoder.split_backend("all-MiniLM-L6-v2") == ("all-MiniLM-L6-v2", "torch")
  assert encoder.split_backend("all-MiniLM-L6-v2:onnx", "torch") == ("all-MiniLM-L6-v2", "torch")
  with pytest.raises(encoder.EncoderError, match="unknown encoder backend 'tpu'"):
    encoder.SentenceEncoder(backend="tpu", cache_path=tmp_path / "e.sqlite")
  with pytest.raises(encoder.EncoderError, match="bundled all-MiniLM-L6-v2 only"):
    encoder.SentenceEncoder("some/other-model", backend="onnx", cache_path=tmp_path / "e.sqlite")
  ids = {b: encoder.SentenceEncoder(backend=b, cache_path=tmp_path / "e.sqlite").model_id for b in encoder.BACKENDS}
  assert ids["torch"] == f"all-MiniLM-L6-v2@{encoder.DEFAULT_MODEL_SHA256[:16]}"  # existing caches stay valid
  assert len(set(ids.values())) == len(encoder.BACKENDS)  # backends never share cached vectors


def test_the_jax_backend_agrees_with_torch_and_gives_each_text_its_own_bytes(tmp_path):
  """The jax backend (`learn/jax_encoder.py`) computes the network torch runs: the stored torch embeddings to
  float32 rounding (edge cases included: empty, long, non-ASCII texts); a text's vector does not depend on the
  texts embedded beside it or on the thread count; its tokens are padded to a bucket of their own length."""
  texts, reference = _reference()
  one = encoder.SentenceEncoder(backend="jax", cache_path=tmp_path / "a.sqlite", threads=1)
  vecs = one.encode(texts)
  cosine = np.sum(vecs * reference, axis=1)
  assert cosine.min() >= 0.99999, (float(cosine.min()), int(cosine.argmin()))
  assert np.abs(vecs - reference).max() < 1e-5
  two = encoder.SentenceEncoder(backend="jax", cache_path=tmp_path / "b.sqlite", threads=2)
  shuffled = list(reversed(texts))
  assert np.array_equal(two.encode(shuffled)[::-1], vecs)  # other neighbours, other order, two threads
  alone = encoder.SentenceEncoder(backend="jax", cache_path=tmp_path / "c.sqlite", threads=1)
  assert np.array_equal(alone.encode([texts[3]])[0], vecs[3])
  model = one._load()[0]  # pylint: disable=protected-access
  from hieramas_jax.learn import jax_encoder  # pylint: disable=import-outside-toplevel
  for text in ("", "two words", "word " * 400):
    ids, mask = model.tokens(text)
    assert len(ids) % jax_encoder.BUCKET == 0 and 0 < mask.sum() <= model.max_length
    assert len(ids) - mask.sum() < jax_encoder.BUCKET and not ids[mask == 0].any()
  assert model.tokens("word " * 400)[1].sum() == model.max_length  # truncated as sentence-transformers does
