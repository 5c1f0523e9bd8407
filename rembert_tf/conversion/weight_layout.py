"""The canonical weight layout every checkpoint format converts through.

Canonical tensors are numpy arrays under the released TF1 RemBERT / BERT
names and shapes; the output side, whose released names are undocumented,
gets this project's (`cls/predictions/...`, `cls/output_layers/layer_N/...`).
`expected_canonical_shapes` is the table, from a config; `slots_for_*` pair
it with the variables of a rembert_tf model, `hf_name` with Hugging Face's
names (`HF_ACTIVATIONS` and `hf_shard_files` read Hugging Face's config and
index; no TensorFlow nor Keras here: both sides read them). Builds on the
name mapping of Model Garden's `tf1_bert_checkpoint_converter_lib`.
"""
import dataclasses
import json
import re
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rembert_tf.common import errors

ENCODER_PREFIX = "bert/"
OUTPUT_SIDE_PREFIX = "cls/"
PROJECTION_KERNEL = "bert/encoder/embedding_hidden_mapping_in/kernel"
PROJECTION_BIAS = "bert/encoder/embedding_hidden_mapping_in/bias"
OUTPUT_EMBEDDING = "cls/predictions/output_embedding"

# TF1 optimizer and bookkeeping variables: never weights of the model.
_OPTIMIZER_NAME_PARTS = ("adam_m", "adam_v", "Adam", "Adam_1",
                         "AdamWeightDecayOptimizer",
                         "AdamWeightDecayOptimizer_1", "LAMB", "LAMB_1",
                         "Momentum", "Adafactor")
_BOOKKEEPING_NAMES = ("global_step", "_CHECKPOINTABLE_OBJECT_GRAPH",
                      "good_steps", "loss_scale", "current_loss_scale")
_ASSIGN_BLOCK_BYTES = 64 << 20


class ConversionError(errors.RemBertError, ValueError):
  """A checkpoint does not match its config or the target layout (every offending name listed)."""


def is_optimizer_or_bookkeeping(name: str) -> bool:
  """True for TF1 optimizer slots (adam_m, adam_v, ...) and global_step."""
  parts = name.split("/")
  return (name in _BOOKKEEPING_NAMES or parts[-1] in _BOOKKEEPING_NAMES
          or any(p in _OPTIMIZER_NAME_PARTS for p in parts))


@dataclasses.dataclass
class Slot:
  """The tf.Variable holding one canonical tensor (`shape`: the canonical one,
  a reshape of the variable's)."""
  name: str
  variable: Any
  shape: Tuple[int, ...]

  def read(self) -> np.ndarray:
    return np.reshape(self.variable.numpy(), self.shape)

  def assign(self, value):
    """Assigns a numpy array (in row blocks, to bound scratch memory) or a tf.Tensor."""
    # TensorFlow is imported by the callers that hold TF models.
    tf = sys.modules.get("tensorflow")
    dtype = self.variable.dtype
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


# One Transformer block: (canonical part, its layer in Model Garden's
# TransformerEncoderBlock, the [in, out] widths of its kernel; None: a
# LayerNorm).
_BLOCK = (("attention/self/query", "_attention_layer._query_dense", "hh"),
          ("attention/self/key", "_attention_layer._key_dense", "hh"),
          ("attention/self/value", "_attention_layer._value_dense", "hh"),
          ("attention/output/dense", "_attention_layer._output_dense", "hh"),
          ("attention/output/LayerNorm", "_attention_layer_norm", None),
          ("intermediate/dense", "_intermediate_dense", "hf"),
          ("output/dense", "_output_dense", "fh"),
          ("output/LayerNorm", "_output_layer_norm", None))


def _layer_slots(prefix, layer) -> List[Slot]:
  """A LayerNorm's gamma / beta, or a Dense / EinsumDense's kernel flattened
  to [in, out] (attention kernels are per head) and bias."""
  if hasattr(layer, "gamma"):
    return [Slot(f"{prefix}/{part}", getattr(layer, part),
                 tuple(getattr(layer, part).shape))
            for part in ("gamma", "beta")]
  shape = [int(d) for d in layer.kernel.shape]
  if layer.name.endswith("attention_output"):  # [heads, head_dim, H]
    kernel = (shape[0] * shape[1], shape[2])
  else:  # [in, out] or [H, heads, head_dim]
    kernel = (shape[0], int(np.prod(shape[1:])))
  return [Slot(prefix + "/kernel", layer.kernel, kernel),
          Slot(prefix + "/bias", layer.bias, (int(np.prod(layer.bias.shape)),))]


def _block_slots(prefix, block) -> List[Slot]:
  slots = []
  for part, attributes, _ in _BLOCK:
    layer = block
    for attribute in attributes.split("."):
      layer = getattr(layer, attribute)
    slots += _layer_slots(f"{prefix}/{part}", layer)
  return slots


def slots_for_encoder(encoder) -> List[Slot]:
  """Canonical slots of a RemBertEncoder (no projection when E_in == hidden)."""
  slots = []
  for name, layer in (("word_embeddings", encoder._embedding_layer),  # pylint: disable=protected-access
                      ("position_embeddings", encoder._position_embedding_layer),  # pylint: disable=protected-access
                      ("token_type_embeddings", encoder._type_embedding_layer)):  # pylint: disable=protected-access
    (variable,) = layer.trainable_weights
    slots.append(Slot(f"bert/embeddings/{name}", variable,
                      tuple(variable.shape)))
  slots += _layer_slots("bert/embeddings/LayerNorm",
                        encoder._embedding_norm_layer)  # pylint: disable=protected-access
  if encoder._embedding_projection is not None:  # pylint: disable=protected-access
    slots += _layer_slots("bert/encoder/embedding_hidden_mapping_in",
                          encoder._embedding_projection)  # pylint: disable=protected-access
  for i, block in enumerate(encoder.transformer_layers):
    slots += _block_slots(f"bert/encoder/layer_{i}", block)
  return slots + _layer_slots("bert/pooler/dense", encoder.pooler_layer)


def slots_for_output_side(pretrainer) -> List[Slot]:
  """Canonical slots of a RemBertPretrainer's output side (not a coupled one's)."""
  head = pretrainer.masked_lm
  if head.coupled:
    raise ConversionError(
        "the model is coupled (`coupled: true`): its MLM head reuses the input "
        "word embedding, which the canonical layout has no separate name for. "
        "Convert the encoder only.")
  slots = _layer_slots("cls/predictions/transform/dense", head.dense)
  slots += _layer_slots("cls/predictions/transform/LayerNorm", head.layer_norm)
  slots += [Slot(OUTPUT_EMBEDDING, head.output_embedding,
                 tuple(head.output_embedding.shape)),
            Slot("cls/predictions/output_bias", head.bias,
                 tuple(head.bias.shape))]
  for i, block in enumerate(pretrainer.output_layers):
    slots += _block_slots(f"cls/output_layers/layer_{i}", block)
  return slots


def slots_for_pretrainer(pretrainer) -> List[Slot]:
  return slots_for_encoder(pretrainer.encoder) + slots_for_output_side(pretrainer)


def _block_shapes(prefix, h, ffn) -> Dict[str, Tuple[int, ...]]:
  width, shapes = {"h": h, "f": ffn}, {}
  for part, _, dims in _BLOCK:
    if dims:
      shapes[f"{prefix}/{part}/kernel"] = (width[dims[0]], width[dims[1]])
      shapes[f"{prefix}/{part}/bias"] = (width[dims[1]],)
    else:
      shapes[f"{prefix}/{part}/gamma"] = shapes[f"{prefix}/{part}/beta"] = (h,)
  return shapes


def expected_canonical_shapes(cfg, with_projection: Optional[bool] = None,
                              output_side: bool = False) -> Dict[str, Tuple[int, ...]]:
  """Canonical name -> shape for a config, without building a model."""
  h, e_in, v = cfg.hidden_size, cfg.input_embedding_size, cfg.vocab_size
  shapes = {
      "bert/embeddings/word_embeddings": (v, e_in),
      "bert/embeddings/position_embeddings": (cfg.max_position_embeddings, e_in),
      "bert/embeddings/token_type_embeddings": (cfg.type_vocab_size, e_in),
      "bert/embeddings/LayerNorm/gamma": (e_in,),
      "bert/embeddings/LayerNorm/beta": (e_in,),
  }
  if e_in != h if with_projection is None else with_projection:
    shapes[PROJECTION_KERNEL] = (e_in, h)
    shapes[PROJECTION_BIAS] = (h,)
  for i in range(cfg.num_hidden_layers):
    shapes.update(_block_shapes(f"bert/encoder/layer_{i}", h,
                                cfg.intermediate_size))
  shapes["bert/pooler/dense/kernel"] = (h, h)
  shapes["bert/pooler/dense/bias"] = (h,)
  if output_side:
    e_out = cfg.output_embedding_size
    shapes.update({
        "cls/predictions/transform/dense/kernel": (h, e_out),
        "cls/predictions/transform/dense/bias": (e_out,),
        "cls/predictions/transform/LayerNorm/gamma": (e_out,),
        "cls/predictions/transform/LayerNorm/beta": (e_out,),
        OUTPUT_EMBEDDING: (v, e_out),
        "cls/predictions/output_bias": (v,),
    })
    for i in range(cfg.num_output_layers):
      shapes.update(_block_shapes(f"cls/output_layers/layer_{i}", h,
                                  cfg.intermediate_size))
  return shapes


def is_identity_projection(kernel: np.ndarray, bias: np.ndarray) -> bool:
  return (kernel.ndim == 2 and kernel.shape[0] == kernel.shape[1]
          and np.array_equal(kernel, np.eye(kernel.shape[0], dtype=kernel.dtype))
          and not np.any(bias))


def check_names_and_shapes(source: str, found: Dict[str, Sequence[int]],
                           expected: Dict[str, Sequence[int]], hint: str):
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
  raise ConversionError("\n".join(lines + [hint]))


# Hugging Face's spellings of RemBERT's activations (`hidden_act`) -> the
# project's; the other names are the same on both sides.
HF_ACTIVATIONS = {"gelu_new": "gelu_approx", "gelu_pytorch_tanh": "gelu_approx",
                  "silu": "swish"}


def hf_name(canonical: str, prefix: str = "rembert.") -> Tuple[str, bool]:
  """Canonical name -> (Hugging Face transformers name, transposed?).

  torch Linear weights are [out, in], so kernels are transposed; embedding
  tables and the output embedding are not.
  """
  name = re.sub(r"^bert/", prefix.replace(".", "/"), canonical)
  name = re.sub(r"/layer_(\d+)/", r"/layer/\1/", name)
  name = name.replace("cls/predictions/transform/", "cls/predictions/")
  name = name.replace("output_embedding", "decoder/weight").replace(
      "output_bias", "decoder/bias")
  if name.endswith("_embeddings"):
    name += "/weight"
  stem, leaf = name.rsplit("/", 1)
  leaf = {"kernel": "weight", "gamma": "weight", "beta": "bias"}.get(leaf, leaf)
  return f"{stem}/{leaf}".replace("/", "."), canonical.endswith("/kernel")


def hf_shard_files(index_path: str, read_text) -> List[str]:
  """The shard files a `model.safetensors.index.json` lists (`read_text`:
  its reader)."""
  try:
    weight_map = json.loads(read_text(index_path)).get("weight_map")
  except (ValueError, AttributeError):  # not UTF-8 JSON, not an object
    weight_map = None
  if (not isinstance(weight_map, dict) or not weight_map
      or not all(isinstance(f, str) for f in weight_map.values())):
    raise ConversionError(
        f"{index_path}: not a safetensors index (JSON whose `weight_map` maps "
        "each tensor name to its shard file); restore the index file that "
        "came with the shards, or save the model again.")
  return sorted(set(weight_map.values()))


# === the output side of a TF1 checkpoint, matched by role and shape ===
def _leaf(name: str) -> str:
  return name.rsplit("/", 1)[-1].lower()


def _in_norm(name: str) -> bool:
  return "layernorm" in name.lower() or "layer_norm" in name.lower()


def output_side_roles(cfg) -> List[Tuple[str, Tuple[int, ...], object]]:
  """(canonical name, shape, name test) of each tensor of BERT's MLM head."""
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

  `shapes`: the checkpoint's tensors outside the encoder, optimizer slots
  left out; among several [vocab, E_out] candidates, a name containing
  `output_embedding` wins. One ConversionError lists every role with no
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
