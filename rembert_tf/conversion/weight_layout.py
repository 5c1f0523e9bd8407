"""One neutral weight layout shared by every checkpoint format (TF1, HF, rembert_tf).

Canonical tensors are numpy arrays keyed by the released TF1 RemBERT / BERT
variable names and shapes; the output side, whose released names are
undocumented, gets this project's (`cls/predictions/transform/...`,
`cls/predictions/output_embedding` [V, E_out], `cls/predictions/output_bias`,
`cls/output_layers/layer_N/...`). `slots_for_encoder` /
`slots_for_pretrainer` say which Keras variable holds each canonical tensor;
`hf_name` gives the Hugging Face name. Builds on the name mapping of Model
Garden's `tf1_bert_checkpoint_converter_lib`.

Example:
<!-- snippet: not run: a fragment: `encoder` comes from the caller's code -->
```python
from rembert_tf.conversion import weight_layout
slots = weight_layout.slots_for_encoder(encoder)
tensors = {s.name: s.read() for s in slots}          # canonical numpy arrays
for s in slots: s.assign(tensors[s.name])            # and back
```
"""
import dataclasses
import re
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rembert_tf.common import errors

ENCODER_PREFIX = "bert/"
OUTPUT_SIDE_PREFIX = "cls/"
PROJECTION_KERNEL = "bert/encoder/embedding_hidden_mapping_in/kernel"
PROJECTION_BIAS = "bert/encoder/embedding_hidden_mapping_in/bias"

# TF1 optimizer and bookkeeping variables: never weights of the model.
_OPTIMIZER_NAME_PARTS = ("adam_m", "adam_v", "Adam", "Adam_1",
                         "AdamWeightDecayOptimizer",
                         "AdamWeightDecayOptimizer_1", "LAMB", "LAMB_1",
                         "Momentum", "Adafactor")
_ASSIGN_BLOCK_BYTES = 64 << 20
_BOOKKEEPING_NAMES = ("global_step", "_CHECKPOINTABLE_OBJECT_GRAPH",
                      "good_steps", "loss_scale", "current_loss_scale")


class ConversionError(errors.RemBertError, ValueError):
  """A checkpoint does not match its config or the target layout (every offending name listed)."""


def is_optimizer_or_bookkeeping(name: str) -> bool:
  """True for TF1 optimizer slots (adam_m, adam_v, ...) and global_step."""
  parts = name.split("/")
  if name in _BOOKKEEPING_NAMES or parts[-1] in _BOOKKEEPING_NAMES:
    return True
  return any(p in _OPTIMIZER_NAME_PARTS for p in parts)


@dataclasses.dataclass
class Slot:
  """One canonical tensor and the Keras variable that holds it.

  Attributes:
    name: canonical (TF1-style) name.
    variable: the tf.Variable in the rembert_tf model.
    shape: canonical shape (may differ from the variable's by a reshape).
  """
  name: str
  variable: Any   # a tf.Variable
  shape: Tuple[int, ...]

  def read(self) -> np.ndarray:
    return np.reshape(self.variable.numpy(), self.shape)

  def assign(self, value):
    """Assigns a numpy array (in row blocks, to bound scratch memory) or a tf.Tensor."""
    if tuple(value.shape) != tuple(self.shape):
      raise ConversionError(f"{self.name}: shape {tuple(value.shape)}, "
                            f"expected {tuple(self.shape)}.")
    dtype = self.variable.dtype
    # TensorFlow is imported by the callers that hold TF models; the Keras 3
    # classes read the Hugging Face names below without it.
    tf = sys.modules.get("tensorflow")
    if tf is not None and isinstance(value, tf.Tensor):
      self.variable.assign(tf.reshape(tf.cast(value, dtype), self.variable.shape))
      return
    array = np.reshape(np.asarray(value), self.variable.shape).astype(
        dtype.as_numpy_dtype, copy=False)
    if array.ndim == 0 or array.nbytes <= _ASSIGN_BLOCK_BYTES:
      self.variable.assign(array)
      return
    rows = max(1, _ASSIGN_BLOCK_BYTES // max(1, array[0].nbytes))
    for start in range(0, array.shape[0], rows):
      self.variable[start:start + rows].assign(array[start:start + rows])


def _dense_slots(prefix, layer) -> List[Slot]:
  """Kernel/bias of a Dense/EinsumDense, flattened to 2-D [in, out] / [out]."""
  kernel, bias = layer.kernel, layer.bias
  return [Slot(prefix + "/kernel", kernel, _as_2d(kernel.shape, layer)),
          Slot(prefix + "/bias", bias, (int(np.prod(bias.shape)),))]


def _as_2d(shape, layer) -> Tuple[int, int]:
  """2-D [in, out] shape of a (possibly per-head) kernel."""
  shape = [int(d) for d in shape]
  name = layer.name
  if len(shape) == 2:
    return tuple(shape)
  if name.endswith("attention_output"):  # [heads, head_dim, H] -> [H_in, H]
    return (shape[0] * shape[1], shape[2])
  return (shape[0], int(np.prod(shape[1:])))  # [H, heads, head_dim] -> [H, H]


def _norm_slots(prefix, layer) -> List[Slot]:
  return [Slot(prefix + "/gamma", layer.gamma, tuple(layer.gamma.shape)),
          Slot(prefix + "/beta", layer.beta, tuple(layer.beta.shape))]


# One Transformer block: (canonical part, its layer in Model Garden's
# TransformerEncoderBlock, [in, out] of a kernel or None for a LayerNorm).
_BLOCK = (("attention/self/query", "_attention_layer._query_dense", "hh"),
          ("attention/self/key", "_attention_layer._key_dense", "hh"),
          ("attention/self/value", "_attention_layer._value_dense", "hh"),
          ("attention/output/dense", "_attention_layer._output_dense", "hh"),
          ("attention/output/LayerNorm", "_attention_layer_norm", None),
          ("intermediate/dense", "_intermediate_dense", "hf"),
          ("output/dense", "_output_dense", "fh"),
          ("output/LayerNorm", "_output_layer_norm", None))


def _block_slots(prefix, block) -> List[Slot]:
  """One Model Garden TransformerEncoderBlock in BERT's TF1 names."""
  slots = []
  for part, attributes, dims in _BLOCK:
    layer = block
    for attribute in attributes.split("."):
      layer = getattr(layer, attribute)
    slots += (_dense_slots if dims else _norm_slots)(f"{prefix}/{part}", layer)
  return slots


def _table_slot(name, layer) -> Slot:
  (variable,) = layer.trainable_weights
  return Slot(name, variable, tuple(variable.shape))


def slots_for_encoder(encoder) -> List[Slot]:
  """Canonical slots of a RemBertEncoder, in a fixed order (no projection slot
  when E_in == hidden)."""
  e = encoder
  slots = [
      _table_slot("bert/embeddings/word_embeddings", e._embedding_layer),  # pylint: disable=protected-access
      _table_slot("bert/embeddings/position_embeddings",
                  e._position_embedding_layer),  # pylint: disable=protected-access
      _table_slot("bert/embeddings/token_type_embeddings",
                  e._type_embedding_layer),  # pylint: disable=protected-access
  ]
  slots += _norm_slots("bert/embeddings/LayerNorm", e._embedding_norm_layer)  # pylint: disable=protected-access
  if e._embedding_projection is not None:  # pylint: disable=protected-access
    slots += _dense_slots("bert/encoder/embedding_hidden_mapping_in",
                          e._embedding_projection)  # pylint: disable=protected-access
  for i, block in enumerate(e.transformer_layers):
    slots += _block_slots(f"bert/encoder/layer_{i}", block)
  slots += _dense_slots("bert/pooler/dense", e.pooler_layer)
  return slots


def slots_for_output_side(pretrainer) -> List[Slot]:
  """Canonical slots of a RemBertPretrainer's output side; ConversionError for a
  coupled head (its output embedding is the encoder's table)."""
  head = pretrainer.masked_lm
  if head.coupled:
    raise ConversionError(
        "the model is coupled (`coupled: true`): its MLM head reuses the input "
        "word embedding, which the canonical layout has no separate name for. "
        "Convert the encoder only.")
  slots = _dense_slots("cls/predictions/transform/dense", head.dense)
  slots += _norm_slots("cls/predictions/transform/LayerNorm", head.layer_norm)
  slots += [
      Slot("cls/predictions/output_embedding", head.output_embedding,
           tuple(head.output_embedding.shape)),
      Slot("cls/predictions/output_bias", head.bias, tuple(head.bias.shape)),
  ]
  for i, block in enumerate(pretrainer.output_layers):
    slots += _block_slots(f"cls/output_layers/layer_{i}", block)
  return slots


def slots_for_pretrainer(pretrainer) -> List[Slot]:
  return slots_for_encoder(pretrainer.encoder) + slots_for_output_side(pretrainer)


def is_identity_projection(kernel: np.ndarray, bias: np.ndarray) -> bool:
  return (kernel.ndim == 2 and kernel.shape[0] == kernel.shape[1]
          and np.array_equal(kernel, np.eye(kernel.shape[0], dtype=kernel.dtype))
          and not np.any(bias))


def check_names_and_shapes(source: str,
                           found: Dict[str, Sequence[int]],
                           expected: Dict[str, Sequence[int]],
                           hint: str = ""):
  """Raises ONE ConversionError listing every missing, unexpected or misshapen name."""
  missing = sorted(n for n in expected if n not in found)
  unexpected = sorted(n for n in found if n not in expected)
  misshapen = sorted(
      f"{n}: found {tuple(found[n])}, expected {tuple(expected[n])}"
      for n in expected
      if n in found and tuple(found[n]) != tuple(expected[n]))
  if not (missing or unexpected or misshapen):
    return
  lines = [f"{source} does not match the model config "
           f"({len(missing)} missing, {len(unexpected)} unexpected, "
           f"{len(misshapen)} with a wrong shape):"]
  lines += [f"  missing: {n}" for n in missing]
  lines += [f"  unexpected: {n}" for n in unexpected]
  lines += [f"  wrong shape: {n}" for n in misshapen]
  lines.append(hint or "Check that the config (layers, sizes, vocab_size) is "
               "the one this checkpoint was trained with.")
  raise ConversionError("\n".join(lines))


# === Hugging Face names ===
def hf_name(canonical: str, prefix: str = "rembert.") -> Tuple[str, bool]:
  """Canonical name -> (HF transformers name, transpose?).

  torch Linear weights are [out, in], so kernels are transposed; embedding
  tables and the output embedding are not.
  """
  if canonical == "cls/predictions/output_embedding":
    return "cls.predictions.decoder.weight", False
  if canonical == "cls/predictions/output_bias":
    return "cls.predictions.decoder.bias", False
  if canonical.startswith("cls/predictions/transform/"):
    rest = canonical[len("cls/predictions/transform/"):]
    return _hf_leaf("cls.predictions." + rest.replace("/", "."))
  if canonical.startswith("cls/output_layers/"):
    raise ConversionError(
        f"{canonical}: Hugging Face RemBERT has no extra output-side "
        "Transformer layers (num_output_layers > 0); convert the encoder only.")
  if not canonical.startswith(ENCODER_PREFIX):
    raise ConversionError(f"{canonical}: no Hugging Face name for it.")
  rest = canonical[len(ENCODER_PREFIX):]
  match = re.match(r"^encoder/layer_(\d+)/(.*)$", rest)
  if match:
    rest = f"encoder/layer/{match.group(1)}/{match.group(2)}"
  name = prefix + rest.replace("/", ".")
  if canonical.endswith("_embeddings"):
    return name + ".weight", False
  return _hf_leaf(name)


def _hf_leaf(name: str) -> Tuple[str, bool]:
  stem, leaf = name.rsplit(".", 1)
  if leaf == "kernel":
    return stem + ".weight", True
  if leaf == "gamma":
    return stem + ".weight", False
  if leaf == "beta":
    return stem + ".bias", False
  return name, False


def expected_canonical_shapes(cfg, with_projection: Optional[bool] = None,
                              output_side: bool = False) -> Dict[str, Tuple[int, ...]]:
  """Canonical name -> shape for a config, without building a model."""
  h, e_in, v = cfg.hidden_size, cfg.input_embedding_size, cfg.vocab_size
  ffn = cfg.intermediate_size
  if with_projection is None:
    with_projection = e_in != h
  shapes = {
      "bert/embeddings/word_embeddings": (v, e_in),
      "bert/embeddings/position_embeddings": (cfg.max_position_embeddings, e_in),
      "bert/embeddings/token_type_embeddings": (cfg.type_vocab_size, e_in),
      "bert/embeddings/LayerNorm/gamma": (e_in,),
      "bert/embeddings/LayerNorm/beta": (e_in,),
  }
  if with_projection:
    shapes[PROJECTION_KERNEL] = (e_in, h)
    shapes[PROJECTION_BIAS] = (h,)

  def block(prefix):
    out, width = {}, {"h": h, "f": ffn}
    for part, _, dims in _BLOCK:
      if dims:
        out[f"{prefix}/{part}/kernel"] = (width[dims[0]], width[dims[1]])
        out[f"{prefix}/{part}/bias"] = (width[dims[1]],)
      else:
        out[f"{prefix}/{part}/gamma"] = out[f"{prefix}/{part}/beta"] = (h,)
    return out

  for i in range(cfg.num_hidden_layers):
    shapes.update(block(f"bert/encoder/layer_{i}"))
  shapes["bert/pooler/dense/kernel"] = (h, h)
  shapes["bert/pooler/dense/bias"] = (h,)
  if output_side:
    e_out = cfg.output_embedding_size
    shapes.update({
        "cls/predictions/transform/dense/kernel": (h, e_out),
        "cls/predictions/transform/dense/bias": (e_out,),
        "cls/predictions/transform/LayerNorm/gamma": (e_out,),
        "cls/predictions/transform/LayerNorm/beta": (e_out,),
        "cls/predictions/output_embedding": (v, e_out),
        "cls/predictions/output_bias": (v,),
    })
    for i in range(cfg.num_output_layers):
      shapes.update(block(f"cls/output_layers/layer_{i}"))
  return shapes


# === the output side of a TF1 checkpoint, matched by role and shape ===
OUTPUT_EMBEDDING = "cls/predictions/output_embedding"


def _leaf(name: str) -> str:
  return name.rsplit("/", 1)[-1].lower()


def _in_norm(name: str) -> bool:
  return "layernorm" in name.lower() or "layer_norm" in name.lower()


def output_side_roles(cfg) -> List[Tuple[str, Tuple[int, ...], object]]:
  """(canonical name, shape, name test) of each output-side tensor of BERT's MLM head."""
  h, e_out, v = cfg.hidden_size, cfg.output_embedding_size, cfg.vocab_size
  return [
      ("cls/predictions/transform/dense/kernel", (h, e_out),
       lambda n: _leaf(n) in ("kernel", "weight", "w")
       and "embedding" not in n.lower()),
      ("cls/predictions/transform/dense/bias", (e_out,),
       lambda n: _leaf(n) in ("bias", "b") and not _in_norm(n)
       and "output_bias" not in n.lower()),
      ("cls/predictions/transform/LayerNorm/gamma", (e_out,),
       lambda n: _leaf(n) in ("gamma", "scale")
       or (_in_norm(n) and _leaf(n) == "weight")),
      ("cls/predictions/transform/LayerNorm/beta", (e_out,),
       lambda n: _leaf(n) in ("beta", "offset")
       or (_in_norm(n) and _leaf(n) == "bias")),
      (OUTPUT_EMBEDDING, (v, e_out), lambda n: True),
      ("cls/predictions/output_bias", (v,), lambda n: "bias" in _leaf(n)),
  ]


def match_output_side(source: str, shapes: Dict[str, Sequence[int]],
                      cfg) -> Dict[str, str]:
  """Canonical output-side name -> the checkpoint's name, by role and shape.

  `shapes`: the checkpoint's tensors that are neither encoder weights nor
  optimizer slots; among several [vocab, E_out] candidates, a name containing
  `output_embedding` wins. Raises ConversionError listing every role with no
  candidate or several.
  """
  if cfg.num_output_layers:
    raise ConversionError(
        f"{source}: num_output_layers={cfg.num_output_layers}, but the output "
        "side of a TF1 checkpoint is matched for BERT's MLM head only; convert "
        "without --with_output_side.")
  found, problems, claimed = {}, [], {}
  for canonical, shape, fits in output_side_roles(cfg):
    candidates = sorted(n for n, s in shapes.items()
                        if tuple(s) == tuple(shape) and fits(n))
    if canonical == OUTPUT_EMBEDDING and len(candidates) > 1:
      named = [n for n in candidates if "output_embedding" in n.lower()]
      candidates = named or candidates
    if not candidates:
      problems.append(f"no tensor of shape {tuple(shape)} for {canonical}")
    elif len(candidates) > 1:
      problems.append(f"{canonical} {tuple(shape)} is ambiguous: "
                      + ", ".join(candidates))
    else:
      found[canonical] = candidates[0]
      claimed.setdefault(candidates[0], []).append(canonical)
  problems += [f"{name} fits several roles: {', '.join(roles)}"
               for name, roles in sorted(claimed.items()) if len(roles) > 1]
  if problems:
    raise ConversionError(
        f"{source}: cannot match the output side ("
        + "; ".join(problems) + "). Tensors outside the encoder: "
        + ", ".join(f"{n} {tuple(s)}" for n, s in sorted(shapes.items()))
        + ". Check output_embedding_size and vocab_size in the config, or "
        "convert the encoder alone (without --with_output_side).")
  return found
