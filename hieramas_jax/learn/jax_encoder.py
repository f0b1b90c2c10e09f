"""JAX backend of the sentence encoder: the bundled all-MiniLM-L6-v2 weights run as one jitted XLA function.

Why: embedding is the largest item of a cold Table 1's CPU profile (709 s of the runner's 1,127 s,
`results/bench.json` key table1). The default torch path spends 90% of it in MKL's sgemm, which the ISA pin
holds at `MKL_CBWR=COMPATIBLE` so that AMD and Intel CPUs give the same bytes: about 43 ms per 62-token text
on one core. XLA's dots under the same pin (`--xla_cpu_max_isa=AVX2`, platform-independent math) are
already byte-equal across those CPUs (the stage-2 fit, `results/bench.json` key isa) and several times
faster here, so this backend computes the same network there.

What it computes: sentence-transformers' three modules for this model (modules.json): the BERT encoder
(absolute positions, token type 0, post-layer-norm blocks, exact-erf GELU, eps 1e-12), mean pooling over the
attention mask, L2 normalisation. Tokens come from the model's own `tokenizer.json` through `tokenizers`,
truncated to `max_seq_length` (256), the ids sentence-transformers uses. Its vectors agree with the torch
backend to float32 rounding (tested), not bit for bit: it is a backend of its own, with its own cache keys.

Same bytes whatever else is embedded: one text per call, padded (mask 0) to the next multiple of `BUCKET`
tokens, a function of its own length only; so at most 256 / BUCKET shapes are compiled, once per process.
"""

from __future__ import annotations

import functools
import json
import pathlib
import threading
from typing import Any, Sequence

import numpy as np

BUCKET = 32  # tokens: a text is padded to the next multiple (8 compiled shapes up to 256)


class JaxEncoderError(RuntimeError):
  """The weights or the tokenizer cannot be read."""


def load_weights(model_dir: str | pathlib.Path) -> tuple[dict[str, Any], dict[str, Any]]:
  """The model's safetensors as float32 numpy arrays, and its BERT config (config.json)."""
  from safetensors.numpy import load_file  # pylint: disable=import-outside-toplevel
  model_dir = pathlib.Path(model_dir)
  try:
    raw = load_file(str(model_dir / "model.safetensors"))
    config = json.loads((model_dir / "config.json").read_text())
  except (OSError, ValueError) as e:
    raise JaxEncoderError(f"cannot read the encoder weights in {model_dir}: {e}") from e
  weights = {k.removeprefix("bert."): np.asarray(v, np.float32) for k, v in raw.items()}
  if config.get("hidden_act") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
    raise JaxEncoderError(f"{model_dir}: not a BERT this backend computes (gelu, absolute positions)")
  return weights, config


def params_from(weights: dict[str, np.ndarray], layers: int) -> dict[str, Any]:
  """The network's parameters as a pytree: Linear weights transposed to [in, out]."""
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel

  def lin(prefix):
    return {"w": jnp.asarray(weights[prefix + ".weight"].T), "b": jnp.asarray(weights[prefix + ".bias"])}

  def norm(prefix):
    return {"g": jnp.asarray(weights[prefix + ".weight"]), "b": jnp.asarray(weights[prefix + ".bias"])}

  blocks = []
  for i in range(layers):
    p = f"encoder.layer.{i}."
    blocks.append({"q": lin(p + "attention.self.query"), "k": lin(p + "attention.self.key"),
                   "v": lin(p + "attention.self.value"), "o": lin(p + "attention.output.dense"),
                   "ln1": norm(p + "attention.output.LayerNorm"), "up": lin(p + "intermediate.dense"),
                   "down": lin(p + "output.dense"), "ln2": norm(p + "output.LayerNorm")})
  return {"word": jnp.asarray(weights["embeddings.word_embeddings.weight"]),
          "pos": jnp.asarray(weights["embeddings.position_embeddings.weight"]),
          "type": jnp.asarray(weights["embeddings.token_type_embeddings.weight"][0]),
          "ln": norm("embeddings.LayerNorm"), "blocks": blocks}


def embed(params: dict[str, Any], ids, mask, *, heads: int, eps: float):
  """One text: token ids [T] and mask [T] (1 = token, 0 = padding) -> unit vector [hidden]. Pure; jitted by
  `JaxSentenceModel` per padded length."""
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel

  def layer_norm(x, p):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * p["g"] + p["b"]

  def dense(x, p):
    return x @ p["w"] + p["b"]

  t = ids.shape[0]
  x = layer_norm(params["word"][ids] + params["pos"][:t] + params["type"], params["ln"])
  hidden = x.shape[-1]
  d = hidden // heads
  bias = jnp.where(mask > 0, 0.0, jnp.finfo(jnp.float32).min)[None, None, :]  # as BERT's extended mask
  for b in params["blocks"]:
    split = lambda y: y.reshape(t, heads, d).transpose(1, 0, 2)  # pylint: disable=cell-var-from-loop
    q, k, v = split(dense(x, b["q"])), split(dense(x, b["k"])), split(dense(x, b["v"]))
    scores = q @ k.transpose(0, 2, 1) / np.float32(np.sqrt(d)) + bias
    ctx = (jax.nn.softmax(scores, axis=-1) @ v).transpose(1, 0, 2).reshape(t, hidden)
    x = layer_norm(x + dense(ctx, b["o"]), b["ln1"])
    x = layer_norm(x + dense(jax.nn.gelu(dense(x, b["up"]), approximate=False), b["down"]), b["ln2"])
  m = mask.astype(x.dtype)[:, None]
  pooled = (x * m).sum(0) / jnp.maximum(m.sum(), 1e-9)  # sentence-transformers' mean pooling
  return pooled / jnp.maximum(jnp.linalg.norm(pooled), 1e-12)  # its Normalize module


class JaxSentenceModel:
  """The `encode(texts) -> unit vectors` / `dim` face the torch and ONNX models have; safe to call from
  several threads (one tokenizer per thread, one shared jitted function)."""

  def __init__(self, model_dir: str | pathlib.Path):
    import jax  # pylint: disable=import-outside-toplevel
    from tokenizers import Tokenizer  # pylint: disable=import-outside-toplevel
    self.model_dir = pathlib.Path(model_dir)
    weights, config = load_weights(self.model_dir)
    self.dim = int(config["hidden_size"])
    self.max_length = json.loads((self.model_dir / "sentence_bert_config.json").read_text())["max_seq_length"]
    self._params = params_from(weights, int(config["num_hidden_layers"]))
    heads, eps = int(config["num_attention_heads"]), float(config["layer_norm_eps"])
    self._fn = jax.jit(lambda p, ids, mask: embed(p, ids, mask, heads=heads, eps=eps))
    self._tokenizer_file = str(self.model_dir / "tokenizer.json")
    Tokenizer.from_file(self._tokenizer_file)  # a damaged tokenizer fails here, not in a worker thread
    self._local = threading.local()

  def _tokenizer(self):
    tok = getattr(self._local, "tok", None)
    if tok is None:
      from tokenizers import Tokenizer  # pylint: disable=import-outside-toplevel
      tok = Tokenizer.from_file(self._tokenizer_file)
      tok.enable_truncation(self.max_length)
      tok.no_padding()
      self._local.tok = tok
    return tok

  def tokens(self, text: str) -> tuple[np.ndarray, np.ndarray]:
    """The text's ids padded to its bucket, and the mask."""
    ids = self._tokenizer().encode(text).ids
    n = len(ids)
    size = min(-(-n // BUCKET) * BUCKET, -(-self.max_length // BUCKET) * BUCKET)
    padded = np.zeros(size, np.int32)
    padded[:n] = ids
    mask = np.zeros(size, np.int32)
    mask[:n] = 1
    return padded, mask

  def encode(self, texts: Sequence[str]) -> np.ndarray:
    out = np.empty((len(texts), self.dim), np.float32)
    for i, text in enumerate(texts):
      ids, mask = self.tokens(text)
      out[i] = np.asarray(self._fn(self._params, ids, mask))
    return out


@functools.lru_cache(maxsize=None)
def load_model(model_dir: str) -> JaxSentenceModel:
  """One model per weights folder and process: every encoder of it shares the weights and the compiled shapes."""
  return JaxSentenceModel(model_dir)
