r"""Linear CKA between the layers of trained encoders, as a table and a heatmap.

CKA(X, Y) = ||Yc^T Xc||_F^2 / (||Xc^T Xc||_F * ||Yc^T Yc||_F) for
column-centred representations X [n, p], Y [n, q] of the same n inputs,
invariant to orthogonal transforms and isotropic scaling (docs/ablation.md);
here of every block's output, per sentence or per token (`pooling`).

Example:
```python
import numpy as np
from rembert_tf.evaluation import layer_similarity
x = np.random.default_rng(0).normal(size=(100, 16))
layer_similarity.linear_cka(x, 3.0 * x)                     # 1.0
matrix = layer_similarity.cka_matrix([x, x[:, :8]], [x])    # shape [2, 1]
```
"""
import dataclasses
from typing import Dict, List, Optional, Sequence

import numpy as np

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import output_overlap
from rembert_tf.common import output_sets
from rembert_tf.common import outputs

RESULT_JSON = "layer_similarity.json"
RESULT_MARKDOWN = "layer_similarity.md"
RESULT_HEATMAP = "layer_similarity.png"
RESULT_FILES = (RESULT_JSON, RESULT_MARKDOWN, RESULT_HEATMAP)


class LayerSimilarityError(errors.RemBertError, ValueError):
  """Inputs that cannot be compared (different row counts, empty inputs)."""


def _centered(x: np.ndarray) -> np.ndarray:
  x = np.asarray(x, np.float64)
  return x - x.mean(axis=0, keepdims=True)


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
  """Linear CKA of two representations of the same n inputs (rows)."""
  return float(cka_matrix([x], [y])[0, 0])


def cka_matrix(layers_a: Sequence[np.ndarray],
               layers_b: Sequence[np.ndarray]) -> np.ndarray:
  """[len(layers_a), len(layers_b)] linear CKA of every pair of layers (same n rows each)."""
  a, b = [_centered(x) for x in layers_a], [_centered(y) for y in layers_b]
  rows = {x.shape[0] for x in a + b}
  if len(rows) != 1:
    raise LayerSimilarityError(
        f"every layer must hold the same inputs; got row counts {sorted(rows)}")
  n = rows.pop()
  if n < 2:
    raise LayerSimilarityError("linear CKA needs at least 2 inputs")
  return _cka(a, b, grams=n <= max(x.shape[1] for x in a + b))


def _cka(a, b, grams: bool) -> np.ndarray:
  """CKA of centred layers from n x n Gram matrices, or feature products."""
  if grams:  # For centred X, <XX^T, YY^T>_F = ||Y^T X||_F^2.
    a, b = [x @ x.T for x in a], [y @ y.T for y in b]
    products = np.array([[np.sum(k * l) for l in b] for k in a])
    norms_a = [np.linalg.norm(k) for k in a]
    norms_b = [np.linalg.norm(l) for l in b]
  else:
    products = np.array([[np.linalg.norm(y.T @ x) ** 2 for y in b] for x in a])
    norms_a = [np.linalg.norm(x.T @ x) for x in a]
    norms_b = [np.linalg.norm(y.T @ y) for y in b]
  denominators = np.outer(norms_a, norms_b)
  # A constant representation has no variance to align: similarity 0.
  return np.divide(products, denominators, out=np.zeros_like(products),
                   where=denominators > 0)


def encode_sentences(sentences: Sequence[str], sp_model, seq_length: int
                     ) -> Dict[str, np.ndarray]:
  """`[CLS] pieces [SEP]` ids, padded to seq_length, and the input mask."""
  from rembert_tf.data import tokenizer  # pylint: disable=g-import-not-at-top
  if not sentences:
    raise LayerSimilarityError("no input sentences to compare")
  tokens = tokenizer.SentencePieceTokenizer(sp_model)
  pad_id = tokens.special.pad_id
  ids = np.full([len(sentences), seq_length], pad_id, np.int32)
  for row, sentence in enumerate(tokens.sentence_ids(sentences, seq_length)):
    ids[row, :len(sentence)] = sentence
  return dict(input_word_ids=ids,  # no piece is the padding id
              input_mask=(ids != pad_id).astype(np.int32),
              input_type_ids=np.zeros_like(ids))


def layer_representations(encoder, inputs: Dict[str, np.ndarray],
                          pooling: str = "mean", batch_size: int = 64
                          ) -> List[np.ndarray]:
  """One [rows, hidden] array per Transformer block of `encoder`: each
  sentence's mean over its real tokens, or (`pooling` "tokens") every one."""
  per_layer = []
  for start in range(0, len(inputs["input_word_ids"]), batch_size):
    batch = {k: v[start:start + batch_size] for k, v in inputs.items()}
    mask = batch["input_mask"].astype(np.float32)
    hidden = [np.asarray(h, np.float32) for h in
              encoder(batch, training=False)["encoder_outputs"]]
    per_layer.append([h[mask > 0] if pooling == "tokens" else
                      (h * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
                      for h in hidden])
  return [np.concatenate(chunks) for chunks in zip(*per_layer)]


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

  def markdown(self) -> str:
    cols = self.matrix.shape[1]
    lines = [f"Linear CKA, rows: {self.label_a}, columns: {self.label_b} "
             f"({self.num_inputs} inputs, {self.pooling} pooling)", "",
             "| layer | " + " | ".join(str(j + 1) for j in range(cols)) + " |",
             "| --- |" + " ---: |" * cols]
    lines += [f"| {i + 1} | " + " | ".join(f"{v:.3f}" for v in row) + " |"
              for i, row in enumerate(self.matrix)]
    return "\n".join(lines) + "\n"


def plot_heatmap(similarity: LayerSimilarity, path) -> None:
  """Writes the CKA matrix as a PNG heatmap (layers numbered from 1)."""
  from rembert_tf.evaluation import plotting  # pylint: disable=g-import-not-at-top
  rows, cols = similarity.matrix.shape
  figure, axes = plotting.new_figure(width=max(5.0, 2.0 + 0.45 * cols),
                                     height=max(4.0, 1.5 + 0.45 * rows))
  image = axes.imshow(similarity.matrix, vmin=0.0, vmax=1.0, cmap="viridis",
                      origin="lower")
  axes.set_xticks(range(cols), [str(j + 1) for j in range(cols)])
  axes.set_yticks(range(rows), [str(i + 1) for i in range(rows)])
  axes.set_xlabel(f"layer: {similarity.label_b}", fontsize=9)
  axes.set_ylabel(f"layer: {similarity.label_a}", fontsize=9)
  if rows * cols <= 256:  # the values in their cells, while they fit
    for (i, j), value in np.ndenumerate(similarity.matrix):
      axes.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                color="black" if value > 0.6 else "white")
  figure.colorbar(image, ax=axes, label="linear CKA")
  axes.set_title("layer similarity (linear CKA)")
  plotting.save_png(figure, path)


def write_similarity(similarity: LayerSimilarity, output_dir,
                     overwrite: bool = False) -> None:
  """layer_similarity.{json,md,png} under output_dir, replaced as one set."""
  with output_sets.atomic_file_set(output_dir, RESULT_FILES, overwrite) as staging:
    plot_heatmap(similarity, fileio.join(staging, RESULT_HEATMAP))
    fileio.write_text(fileio.join(staging, RESULT_MARKDOWN),
                      similarity.markdown())
    fileio.write_json(fileio.join(staging, RESULT_JSON), similarity.as_dict())


def _check_inputs(sentences_a, sentences_b, seq_length, pooling) -> List[str]:
  """The second input set (default: the first), checked to fit the first,
  seq_length and `pooling`."""
  if seq_length < 3:
    raise LayerSimilarityError(
        f"--seq_length {seq_length}: [CLS], a piece and [SEP] need at least "
        "3 positions; give at least 3 (e.g. 128).")
  sentences_b = list(sentences_a if sentences_b is None else sentences_b)
  if len(sentences_b) != len(sentences_a):
    raise LayerSimilarityError(
        f"the two input sets must be parallel: {len(sentences_a)} vs "
        f"{len(sentences_b)} sentences")
  if pooling == "tokens" and sentences_b != list(sentences_a):
    raise LayerSimilarityError(
        "pooling 'tokens' needs the same sentences on both sides; use "
        "pooling 'mean' for parallel sentences of two languages")
  return sentences_b


@outputs.writes_output("output_dir")
def analyze_checkpoints(checkpoint_a: str, checkpoint_b: Optional[str],
                        sentences_a: Sequence[str],
                        sentences_b: Optional[Sequence[str]] = None,
                        sp_model: Optional[str] = None, seq_length: int = 64,
                        pooling: str = "mean", label_a: Optional[str] = None,
                        label_b: Optional[str] = None,
                        output_dir: Optional[str] = None, model_config=None,
                        overwrite: bool = False) -> LayerSimilarity:
  """CKA of every layer pair of two checkpoints (`checkpoint_b` None: the
  first, on `sentences_b`); `sp_model` and `model_config` default to
  checkpoint_a's; an existing result (without `overwrite`) or an `output_dir`
  overlapping an input is refused before any work."""
  from rembert_tf.checkpoints import checkpoint_layout  # pylint: disable=g-import-not-at-top
  from rembert_tf.checkpoints import checkpoint_restore  # pylint: disable=g-import-not-at-top
  sentences_b = _check_inputs(sentences_a, sentences_b, seq_length, pooling)
  sp_model = sp_model or checkpoint_layout.find_sentencepiece(str(checkpoint_a))
  output_overlap.refuse_overlap(output_dir, {
      "--checkpoint": checkpoint_a, "--checkpoint_b": checkpoint_b,
      "--sentencepiece_model": sp_model}, "--output_dir")
  if output_dir is not None:
    output_sets.refuse_existing_members(output_dir, RESULT_FILES, overwrite)
  if not sp_model or not fileio.exists(sp_model):
    raise LayerSimilarityError(
        f"{sp_model or checkpoint_a}: no SentencePiece model found with the "
        "checkpoint; pass sp_model / --sentencepiece_model")
  inputs_a = encode_sentences(sentences_a, sp_model, seq_length)
  inputs_b = encode_sentences(sentences_b, sp_model, seq_length)
  config_a, encoder_a = checkpoint_restore.load_encoder(str(checkpoint_a),
                                                        model_config)
  layers_a = layer_representations(encoder_a, inputs_a, pooling)
  encoder_b = encoder_a
  if checkpoint_b not in (None, checkpoint_a):
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
