r"""Linear CKA between the layers of trained encoders, as a table and a heatmap.

CKA(X, Y) = ||Yc^T Xc||_F^2 / (||Xc^T Xc||_F * ||Yc^T Yc||_F) for
column-centred representations X [n, p], Y [n, q] of the same n inputs; it
is invariant to orthogonal transforms and isotropic scaling, so layers of
different models compare. Every block's output is compared, mean-pooled over
real tokens (`pooling="mean"`) or token by token (`pooling="tokens"`).

Example:
<!-- snippet: not run: needs a checkpoint directory (a pre-training run or a converted checkpoint) -->
```python
import numpy as np
from rembert_tf.evaluation import layer_similarity
x = np.random.default_rng(0).normal(size=(100, 16))
layer_similarity.linear_cka(x, 3.0 * x)                     # 1.0
matrix = layer_similarity.cka_matrix([x, x[:, :8]], [x])    # shape [2, 1]
result = layer_similarity.analyze_checkpoints(
    "runs/pretrain", "runs/finetune/xnli/lr-2e-05_seed-0",
    sentences_a=["A first sentence.", "Another one."], output_dir="/tmp/cka")
```
"""
import dataclasses
from typing import Dict, List, Optional, Sequence

import numpy as np

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import outputs

POOLINGS = ("mean", "tokens")
RESULT_JSON = "layer_similarity.json"
RESULT_MARKDOWN = "layer_similarity.md"
RESULT_HEATMAP = "layer_similarity.png"


# [CLS], at least one piece, [SEP].
MIN_SEQ_LENGTH = 3


class LayerSimilarityError(errors.RemBertError, ValueError):
  """Inputs that cannot be compared (different row counts, empty inputs)."""


# --- Linear CKA ---------------------------------------------------------------


def _centered(x: np.ndarray) -> np.ndarray:
  x = np.asarray(x, np.float64)
  if x.ndim != 2:
    raise LayerSimilarityError(f"representations must be [n, features], got "
                               f"shape {x.shape}")
  return x - x.mean(axis=0, keepdims=True)


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
  """Linear CKA of two representations of the same n inputs (rows)."""
  return float(cka_matrix([x], [y])[0, 0])


def cka_matrix(layers_a: Sequence[np.ndarray],
               layers_b: Sequence[np.ndarray]) -> np.ndarray:
  """[len(layers_a), len(layers_b)] linear CKA of every pair of layers (same n rows each)."""
  a = [_centered(x) for x in layers_a]
  b = [_centered(y) for y in layers_b]
  rows = {x.shape[0] for x in a + b}
  if len(rows) != 1:
    raise LayerSimilarityError(
        f"every layer must hold the same inputs; got row counts {sorted(rows)}")
  n = rows.pop()
  if n < 2:
    raise LayerSimilarityError("linear CKA needs at least 2 inputs")
  widest = max(x.shape[1] for x in a + b)
  if n <= widest:
    return _cka_from_grams([x @ x.T for x in a], [y @ y.T for y in b])
  return _cka_from_features(a, b)


def _cka_from_grams(grams_a, grams_b) -> np.ndarray:
  # For centred X, <XX^T, YY^T>_F = ||Y^T X||_F^2 and ||XX^T||_F = ||X^T X||_F.
  norms_a = [np.linalg.norm(k) for k in grams_a]
  norms_b = [np.linalg.norm(l) for l in grams_b]
  out = np.zeros([len(grams_a), len(grams_b)])
  for i, k in enumerate(grams_a):
    for j, l in enumerate(grams_b):
      out[i, j] = _ratio(np.sum(k * l), norms_a[i] * norms_b[j])
  return out


def _cka_from_features(a, b) -> np.ndarray:
  norms_a = [np.linalg.norm(x.T @ x) for x in a]
  norms_b = [np.linalg.norm(y.T @ y) for y in b]
  out = np.zeros([len(a), len(b)])
  for i, x in enumerate(a):
    for j, y in enumerate(b):
      out[i, j] = _ratio(np.linalg.norm(y.T @ x) ** 2, norms_a[i] * norms_b[j])
  return out


def _ratio(numerator, denominator) -> float:
  # A constant representation has no variance to align: similarity 0.
  return float(numerator / denominator) if denominator > 0 else 0.0


# --- Representations of an encoder ------------------------------------------


def encode_sentences(sentences: Sequence[str], sp_model, seq_length: int
                     ) -> Dict[str, np.ndarray]:
  """`[CLS] pieces [SEP]` ids, padded to seq_length, and the input mask."""
  import sentencepiece as spm  # pylint: disable=g-import-not-at-top
  from rembert_tf.data import tokenizer  # pylint: disable=g-import-not-at-top
  if not sentences:
    raise LayerSimilarityError("no input sentences to compare")
  special = tokenizer.SpecialTokens.from_model(str(sp_model))
  processor = spm.SentencePieceProcessor(
      model_proto=fileio.read_bytes(sp_model))
  ids = np.full([len(sentences), seq_length], special.pad_id, np.int32)
  for row, text in enumerate(sentences):
    pieces = processor.EncodeAsIds(text)[:seq_length - 2]
    tokens = [special.cls_id] + pieces + [special.sep_id]
    ids[row, :len(tokens)] = tokens
  mask = (ids != special.pad_id).astype(np.int32)
  mask[:, 0] = 1
  return dict(input_word_ids=ids, input_mask=mask,
              input_type_ids=np.zeros_like(ids))


def layer_representations(encoder, inputs: Dict[str, np.ndarray],
                          pooling: str = "mean", batch_size: int = 64
                          ) -> List[np.ndarray]:
  """One [rows, hidden] array per Transformer block of `encoder`."""
  if pooling not in POOLINGS:
    raise LayerSimilarityError(f"pooling {pooling!r}: expected one of {POOLINGS}")
  num = inputs["input_word_ids"].shape[0]
  per_layer: List[List[np.ndarray]] = []
  for start in range(0, num, batch_size):
    batch = {k: v[start:start + batch_size] for k, v in inputs.items()}
    outputs = encoder(batch, training=False)["encoder_outputs"]
    mask = batch["input_mask"].astype(np.float32)
    if not per_layer:
      per_layer = [[] for _ in outputs]
    for i, hidden in enumerate(outputs):
      per_layer[i].append(_pool(np.asarray(hidden, np.float32), mask, pooling))
  return [np.concatenate(chunks) for chunks in per_layer]


def _pool(hidden: np.ndarray, mask: np.ndarray, pooling: str) -> np.ndarray:
  if pooling == "tokens":
    return hidden[mask > 0]
  return (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)


# --- Two checkpoints, written out ------------------------------------------


@dataclasses.dataclass
class LayerSimilarity:
  """CKA of every layer of A (rows) against every layer of B (columns)."""
  matrix: np.ndarray
  label_a: str
  label_b: str
  num_inputs: int
  pooling: str

  @property
  def diagonal(self) -> List[float]:
    """Layer i of A against layer i of B (as far as both have layers)."""
    return [float(self.matrix[i, i]) for i in range(min(self.matrix.shape))]

  def as_dict(self) -> Dict:
    return dict(label_a=self.label_a, label_b=self.label_b,
                num_inputs=self.num_inputs, pooling=self.pooling,
                matrix=self.matrix.round(6).tolist(), diagonal=self.diagonal)

  @classmethod
  def from_dict(cls, values: Dict) -> "LayerSimilarity":
    return cls(matrix=np.asarray(values["matrix"], np.float64),
               label_a=values["label_a"], label_b=values["label_b"],
               num_inputs=values["num_inputs"], pooling=values["pooling"])

  def markdown(self) -> str:
    rows, cols = self.matrix.shape
    lines = [f"Linear CKA, rows: {self.label_a}, columns: {self.label_b} "
             f"({self.num_inputs} inputs, {self.pooling} pooling)", "",
             "| layer | " + " | ".join(str(j + 1) for j in range(cols)) + " |",
             "| --- |" + " ---: |" * cols]
    for i in range(rows):
      cells = " | ".join(f"{self.matrix[i, j]:.3f}" for j in range(cols))
      lines.append(f"| {i + 1} | {cells} |")
    return "\n".join(lines) + "\n"


def plot_heatmap(similarity: LayerSimilarity, path) -> None:
  """Writes the CKA matrix as a PNG heatmap (layers numbered from 1)."""
  from rembert_tf.evaluation import plotting  # pylint: disable=g-import-not-at-top
  figure, axes = plotting.new_figure(
      width=max(5.0, 2.0 + 0.45 * similarity.matrix.shape[1]),
      height=max(4.0, 1.5 + 0.45 * similarity.matrix.shape[0]))
  image = axes.imshow(similarity.matrix, vmin=0.0, vmax=1.0, cmap="viridis",
                      origin="lower")
  rows, cols = similarity.matrix.shape
  axes.set_xticks(range(cols), [str(j + 1) for j in range(cols)])
  axes.set_yticks(range(rows), [str(i + 1) for i in range(rows)])
  axes.set_xlabel(f"layer: {similarity.label_b}", fontsize=9)
  axes.set_ylabel(f"layer: {similarity.label_a}", fontsize=9)
  if rows * cols <= 256:
    for i in range(rows):
      for j in range(cols):
        value = similarity.matrix[i, j]
        axes.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                  color="black" if value > 0.6 else "white")
  figure.colorbar(image, ax=axes, label="linear CKA")
  axes.set_title("layer similarity (linear CKA)")
  plotting.save_png(figure, path)


RESULT_FILES = (RESULT_JSON, RESULT_MARKDOWN, RESULT_HEATMAP)


def write_similarity(similarity: LayerSimilarity, output_dir,
                     overwrite: bool = False) -> Dict[str, str]:
  """layer_similarity.{json,md,png} under output_dir, replaced as one set; returns their paths."""
  output_dir = fileio.as_str(output_dir).rstrip("/")
  with outputs.atomic_file_set(output_dir, RESULT_FILES, overwrite) as staging:
    plot_heatmap(similarity, fileio.join(staging, RESULT_HEATMAP))
    fileio.write_text(fileio.join(staging, RESULT_MARKDOWN),
                      similarity.markdown())
    fileio.write_json(fileio.join(staging, RESULT_JSON), similarity.as_dict())
  return {name: fileio.join(output_dir, filename) for name, filename in
          (("json", RESULT_JSON), ("markdown", RESULT_MARKDOWN),
           ("heatmap", RESULT_HEATMAP))}


def _check_inputs(sentences_a: Sequence[str],
                  sentences_b: Optional[Sequence[str]], seq_length,
                  pooling: str) -> List[str]:
  """The second input set (default: the first), checked to fit the first,
  seq_length and `pooling`."""
  if isinstance(seq_length, bool) or not isinstance(seq_length, int) or (
      seq_length < MIN_SEQ_LENGTH):
    raise LayerSimilarityError(
        f"--seq_length {seq_length}: [CLS], a piece and [SEP] need at least "
        f"{MIN_SEQ_LENGTH} positions; give at least {MIN_SEQ_LENGTH} (e.g. "
        "128).")
  sentences_b = list(sentences_b) if sentences_b is not None else list(sentences_a)
  if len(sentences_b) != len(sentences_a):
    raise LayerSimilarityError(
        f"the two input sets must be parallel: {len(sentences_a)} vs "
        f"{len(sentences_b)} sentences")
  if pooling == "tokens" and list(sentences_b) != list(sentences_a):
    raise LayerSimilarityError(
        "pooling 'tokens' needs the same sentences on both sides; use "
        "pooling 'mean' for parallel sentences of two languages")
  return sentences_b


@outputs.writes_output("output_dir")
def analyze_checkpoints(checkpoint_a: str,
                        checkpoint_b: Optional[str],
                        sentences_a: Sequence[str],
                        sentences_b: Optional[Sequence[str]] = None,
                        sp_model: Optional[str] = None,
                        seq_length: int = 64,
                        pooling: str = "mean",
                        label_a: Optional[str] = None,
                        label_b: Optional[str] = None,
                        output_dir: Optional[str] = None,
                        model_config=None,
                        overwrite: bool = False) -> LayerSimilarity:
  """CKA of every layer pair of two checkpoints (or one, on two input sets).

  `checkpoint_b` None compares checkpoint_a with itself on `sentences_b`;
  `sp_model` and `model_config` default to checkpoint_a's. An existing result
  is replaced only with `overwrite`; an `output_dir` overlapping an input is
  refused.
  """
  sentences_b = _check_inputs(sentences_a, sentences_b, seq_length, pooling)
  if sp_model is None:
    from rembert_tf.checkpoints import checkpoint_layout  # pylint: disable=g-import-not-at-top
    sp_model = checkpoint_layout.find_sentencepiece(str(checkpoint_a))
  _check_output(output_dir, overwrite, {
      "--checkpoint": checkpoint_a, "--checkpoint_b": checkpoint_b,
      "--sentencepiece_model": sp_model})
  if not sp_model or not fileio.exists(sp_model):
    raise LayerSimilarityError(
        f"{sp_model or checkpoint_a}: no SentencePiece model found with the "
        "checkpoint; pass sp_model / --sentencepiece_model")
  inputs_a = encode_sentences(sentences_a, sp_model, seq_length)
  inputs_b = encode_sentences(sentences_b, sp_model, seq_length)
  from rembert_tf.checkpoints import checkpoint_restore  # pylint: disable=g-import-not-at-top
  config_a, encoder_a = checkpoint_restore.load_encoder(str(checkpoint_a),
                                                        model_config)
  layers_a = layer_representations(encoder_a, inputs_a, pooling)
  if checkpoint_b is None or checkpoint_b == checkpoint_a:
    encoder_b = encoder_a
  else:
    _, encoder_b = checkpoint_restore.load_encoder(str(checkpoint_b),
                                                   model_config or config_a)
  layers_b = layer_representations(encoder_b, inputs_b, pooling)
  similarity = LayerSimilarity(
      matrix=cka_matrix(layers_a, layers_b),
      label_a=label_a or str(checkpoint_a),
      label_b=label_b or str(checkpoint_b or checkpoint_a),
      num_inputs=int(layers_a[0].shape[0]), pooling=pooling)
  if output_dir is not None:
    write_similarity(similarity, output_dir, overwrite)
  return similarity


def _check_output(output_dir: Optional[str], overwrite: bool,
                  inputs: Dict[str, Optional[str]]) -> None:
  """Before any work: not an input, an earlier result only with overwrite."""
  outputs.refuse_overlap(output_dir, inputs, "--output_dir")
  if output_dir is not None:
    outputs.refuse_existing_members(output_dir, RESULT_FILES, overwrite)


def read_similarity(output_dir) -> Optional[LayerSimilarity]:
  """The result written by `write_similarity`, or None if it is not complete."""
  path = fileio.join(output_dir, RESULT_JSON)
  if not fileio.exists(path):
    return None
  return LayerSimilarity.from_dict(fileio.read_json(path))
