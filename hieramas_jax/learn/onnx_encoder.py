"""ONNX Runtime backend of the sentence encoder: the same all-MiniLM-L6-v2 weights, exported here, offline.

Why: embedding query-role texts on two CPU cores is the slowest pure step of a learned method's cell.
The bundled package ships only safetensors weights (no ONNX file), so the graph is exported locally, once
per (weights, torch, onnxruntime) triple, into `<cache_dir>/onnx/`:
  1. torch.onnx (TorchScript exporter) traces the transformer with eager attention and mean pooling over
     the attention mask, i.e. sentence-transformers' Transformer + Pooling modules, with dynamic batch and
     sequence axes;
  2. onnxruntime's transformer optimizer fuses attention, GELU and layer norms (the eager attention
     pattern is the one it recognises; sdpa's is not);
  3. for the `int8` variant, dynamic int8 quantization of every MatMul (per-channel weights). It is
     measured, not the default: on AVX2 without VNNI it costs cosine agreement (~0.98 worst case).
Tokenization uses the model's own `tokenizer.json` through `tokenizers` (truncation to the model's
max_seq_length, each batch padded to its longest text), so the token ids are sentence-transformers' own.

Texts are sorted by length and run in small batches: little padding, and activations that stay in cache
(on this machine batches of 4-16 ran 1.3-2x faster than sentence-transformers' 64 under both runtimes).
"""

from __future__ import annotations

import json
import os
import pathlib
import tempfile
from typing import Sequence

import numpy as np

from hieramas_jax.fileio import atomic_write_bytes

VARIANTS = ("fp32", "int8")
DEFAULT_BATCH_SIZE = 8


class OnnxEncoderError(RuntimeError):
  """The ONNX graph cannot be exported or run."""


def _versions() -> str:
  import onnxruntime  # pylint: disable=import-outside-toplevel
  import torch  # pylint: disable=import-outside-toplevel
  return f"torch{torch.__version__.split('+')[0]}-ort{onnxruntime.__version__}"


def graph_path(weights_sha256: str, variant: str, cache_root: pathlib.Path) -> pathlib.Path:
  """Where the exported graph of these weights lives (exported on first use by `ensure_graph`)."""
  if variant not in VARIANTS:
    raise OnnxEncoderError(f"unknown ONNX variant {variant!r}; known: {', '.join(VARIANTS)}")
  return cache_root / "onnx" / f"all-minilm-{weights_sha256[:16]}-{_versions()}-{variant}.onnx"


def _export_fp32(model_dir: pathlib.Path, out: pathlib.Path) -> None:
  """Traced transformer + masked mean pooling, then onnxruntime's fusions, written atomically to `out`."""
  import torch  # pylint: disable=import-outside-toplevel
  from onnxruntime.transformers import optimizer  # pylint: disable=import-outside-toplevel
  from transformers import AutoConfig, AutoModel  # pylint: disable=import-outside-toplevel

  config = AutoConfig.from_pretrained(model_dir, local_files_only=True)
  model = AutoModel.from_pretrained(model_dir, local_files_only=True, attn_implementation="eager").eval()

  class MeanPooled(torch.nn.Module):
    """sentence-transformers' Transformer + Pooling(mean) modules (normalisation is done on the host)."""

    def __init__(self, inner):
      super().__init__()
      self.inner = inner

    def forward(self, input_ids, attention_mask):
      tokens = self.inner(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
      mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
      return (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)

  # A padded example: with an all-ones mask transformers may drop the mask from the traced graph.
  ids = torch.randint(1000, 2000, (2, 16))
  mask = torch.ones(2, 16, dtype=torch.long)
  mask[1, 9:] = 0
  with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
    raw = pathlib.Path(tmp) / "raw.onnx"
    with torch.no_grad():
      torch.onnx.export(MeanPooled(model), (ids, mask), str(raw), input_names=["input_ids", "attention_mask"],
                        output_names=["embedding"], opset_version=17, dynamo=False,
                        dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                                      "attention_mask": {0: "batch", 1: "sequence"}, "embedding": {0: "batch"}})
    fused = optimizer.optimize_model(str(raw), model_type="bert", num_heads=config.num_attention_heads,
                                     hidden_size=config.hidden_size, opt_level=1, use_gpu=False)
    if fused.get_fused_operator_statistics().get("Attention", 0) != config.num_hidden_layers:
      raise OnnxEncoderError("onnxruntime did not fuse every attention layer of the exported graph "
                             f"({fused.get_fused_operator_statistics()}); a transformers change?")
    atomic_write_bytes(out, fused.model.SerializeToString())


def _quantize_int8(fp32: pathlib.Path, out: pathlib.Path) -> None:
  from onnxruntime.quantization import QuantType, quantize_dynamic  # pylint: disable=import-outside-toplevel
  with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
    tmp_out = pathlib.Path(tmp) / "int8.onnx"
    # DefaultTensorType: the fused ops come from onnxruntime's contrib domain, which shape inference skips.
    quantize_dynamic(str(fp32), str(tmp_out), weight_type=QuantType.QInt8, per_channel=True,
                     extra_options={"DefaultTensorType": 1})
    atomic_write_bytes(out, tmp_out.read_bytes())


def ensure_graph(model_dir: str | os.PathLike, weights_sha256: str, variant: str,
                 cache_root: pathlib.Path) -> pathlib.Path:
  """The exported graph for these weights, exporting it now if it is not in the cache yet (~5 s)."""
  model_dir = pathlib.Path(model_dir)
  out = graph_path(weights_sha256, variant, cache_root)
  if out.is_file():
    return out
  out.parent.mkdir(parents=True, exist_ok=True)
  fp32 = graph_path(weights_sha256, "fp32", cache_root)
  try:
    if not fp32.is_file():
      _export_fp32(model_dir, fp32)
    if variant == "int8":
      _quantize_int8(fp32, out)
  except OnnxEncoderError:
    raise
  except Exception as e:  # exporter and optimizer raise many library-specific types
    raise OnnxEncoderError(f"cannot export {model_dir} to ONNX: {type(e).__name__}: {e}") from e
  return out


class OnnxSentenceModel:
  """`encode(texts) -> [n, dim]` unit vectors from an exported graph; no torch at run time.

  Args:
    graph: the .onnx file (`ensure_graph`).
    model_dir: the model's directory (tokenizer.json, sentence_bert_config.json).
    batch_size: texts per run after sorting by length.
    threads: onnxruntime intra-op threads (default: every core).
  """

  def __init__(self, graph: str | os.PathLike, model_dir: str | os.PathLike, *,
               batch_size: int = DEFAULT_BATCH_SIZE, threads: int | None = None):
    import onnxruntime as ort  # pylint: disable=import-outside-toplevel
    from tokenizers import Tokenizer  # pylint: disable=import-outside-toplevel
    model_dir = pathlib.Path(model_dir)
    max_length = json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"]
    self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    self.tokenizer.enable_truncation(max_length)
    self.tokenizer.no_padding()  # the file pads to 128; batches are padded to their longest text here
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or os.cpu_count() or 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    self.session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    self.batch_size = batch_size
    self.dim = int(self.session.get_outputs()[0].shape[-1])

  def encode(self, texts: Sequence[str]) -> np.ndarray:
    encodings = self.tokenizer.encode_batch(list(texts))
    lengths = np.array([len(e.ids) for e in encodings])
    order = np.argsort(-lengths, kind="stable")
    out = np.empty((len(texts), self.dim), np.float32)
    for start in range(0, len(texts), self.batch_size):
      rows = order[start:start + self.batch_size]
      width = int(lengths[rows].max())
      ids = np.zeros((len(rows), width), np.int64)
      mask = np.zeros((len(rows), width), np.int64)
      for r, i in enumerate(rows):
        ids[r, :lengths[i]] = encodings[i].ids
        mask[r, :lengths[i]] = 1
      pooled = self.session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
      out[rows] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return out
