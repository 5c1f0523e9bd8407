r"""Converts the released RemBERT to a keras-hub preset, checked against its source.

`--source hf`: a Hugging Face RemBERT folder (`config.json`,
`model.safetensors`, `sentencepiece.model`; a local path or `hf://...`),
loaded by keras-hub's own `from_preset`. `--source tf1`: the released TF1
checkpoint (`model.ckpt` beside its `config.json` and `sentencepiece.model`),
turned into a Hugging Face folder first by rembert_tf's converter
(`python -m rembert_tf.cli.convert_checkpoint --to hf`, streamed; needs
rembert_tf installed), then loaded the same way.

The loaded `RemBertMaskedLM` (backbone, decoupled output side, tokenizer,
preprocessor) is checked against the source's own tensors: a NumPy forward
pass in float64 over the source weights gives the sequence and pooled
outputs of a sample sentence (and the masked-LM logits, from the Hugging Face
weights); the largest differences are printed, and above `--atol` nothing is
saved and the exit code is 1. The preset is then written with
`save_to_preset` into `--output_dir` (default `./<preset>`).

Usage:
  python tools/checkpoint_conversion/convert_rembert_checkpoints.py \
      --preset rembert_multi --source hf --checkpoint hf://google/rembert
  python tools/checkpoint_conversion/convert_rembert_checkpoints.py \
      --preset rembert_multi --source tf1 --checkpoint rembert/model.ckpt
"""
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
from absl import app
from absl import flags

PRESET_MAP = {"rembert_multi": "hf://google/rembert"}
HELP_FLAGS = {"--help", "-h", "-?", "--helpshort", "--helpfull"}
SAMPLE = "The cat sleeps on the red mat. Привет, мир! नमस्ते दुनिया"

FLAGS = flags.FLAGS
flags.DEFINE_enum("preset", None, list(PRESET_MAP), "The preset to write.")
flags.DEFINE_enum("source", "hf", ["hf", "tf1"], "What --checkpoint is.")
flags.DEFINE_string("checkpoint", None, "The source: a Hugging Face folder (default: "
                    "the preset's hf:// handle) or the TF1 checkpoint prefix.")
flags.DEFINE_string("sentencepiece_model", None, "--source tf1: the SentencePiece model "
                    "(default: the one beside the checkpoint).")
flags.DEFINE_string("output_dir", None, "Where the preset goes (a new folder; "
                    "default ./<preset>).")
flags.DEFINE_float("atol", 1e-4, "Largest absolute difference allowed from "
                   "the source's outputs.")


def tf1_to_hf(checkpoint: str, folder: str) -> None:
  """The released checkpoint as a Hugging Face folder, by rembert_tf."""
  if importlib.util.find_spec("rembert_tf") is None:
    raise ValueError("--source tf1: reading the released TF1 checkpoint needs "
                     "rembert_tf (pip install it), or pass a Hugging Face "
                     "folder with --source hf.")
  command = [sys.executable, "-m", "rembert_tf.cli.convert_checkpoint",
             "--from=tf1", "--to=hf", f"--checkpoint={checkpoint}",
             "--with_output_side", f"--output_dir={folder}"]
  if FLAGS.sentencepiece_model:
    command.append(f"--sentencepiece_model={FLAGS.sentencepiece_model}")
  if subprocess.run(command, check=False).returncode != 0:
    raise ValueError(f"--checkpoint {checkpoint}: rembert_tf could not convert it "
                     "(its message is above).")


def hf_tensors(preset: str):
  """Canonical (TF1) name -> array in TF1's orientation, or None: the
  Hugging Face weights, one tensor at a time."""
  from safetensors import safe_open  # pylint: disable=g-import-not-at-top
  from keras_hub.src.utils import preset_utils  # pylint: disable=g-import-not-at-top
  from rembert_tf.conversion.weight_layout import hf_name  # pylint: disable=g-import-not-at-top
  path = preset_utils.get_file(preset, "model.safetensors")

  def get(name):
    key, transpose = hf_name(name)
    with safe_open(path, framework="np") as f:
      keys = set(f.keys())
      key = key if key in keys else key.replace("rembert.", "", 1)
      if key not in keys:
        return None
      value = f.get_tensor(key).astype(np.float64)
    return value.T if transpose else value
  return get


def tf1_tensors(checkpoint: str):
  """The released checkpoint's tensors, read by TensorFlow (its names are
  the canonical ones)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  reader = tf.train.load_checkpoint(checkpoint)
  return lambda name: (reader.get_tensor(name).astype(np.float64)
                       if reader.has_tensor(name) else None)


def _layer_norm(x, get, prefix, eps):
  mean = x.mean(-1, keepdims=True)
  variance = ((x - mean) ** 2).mean(-1, keepdims=True)
  return ((x - mean) / np.sqrt(variance + eps) * get(prefix + "/gamma")
          + get(prefix + "/beta"))


def _dense(x, get, prefix):
  return x @ get(prefix + "/kernel") + get(prefix + "/bias")


def _activation(name):
  if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_approx"):
    return lambda x: 0.5 * x * (1 + np.tanh(
        math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
  erf = np.vectorize(math.erf)
  return lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2)))


def _block(x, get, prefix, config, act):
  heads, eps = config["num_attention_heads"], config["layer_norm_eps"]
  n, hidden = x.shape
  q, k, v = (_dense(x, get, f"{prefix}/attention/self/{part}").reshape(
      n, heads, hidden // heads) for part in ("query", "key", "value"))
  scores = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(hidden // heads)
  probs = np.exp(scores - scores.max(-1, keepdims=True))
  probs /= probs.sum(-1, keepdims=True)
  context = np.einsum("hqk,khd->qhd", probs, v).reshape(n, hidden)
  x = _layer_norm(x + _dense(context, get, f"{prefix}/attention/output/dense"),
                  get, f"{prefix}/attention/output/LayerNorm", eps)
  inner = act(_dense(x, get, f"{prefix}/intermediate/dense"))
  return _layer_norm(x + _dense(inner, get, f"{prefix}/output/dense"), get,
                     f"{prefix}/output/LayerNorm", eps)


def reference_encoder(get, config, ids):
  """Sequence and pooled outputs of one unpadded sentence (segment 0)."""
  act = _activation(config.get("hidden_act", "gelu"))
  x = (get("bert/embeddings/word_embeddings")[ids]
       + get("bert/embeddings/position_embeddings")[:len(ids)]
       + get("bert/embeddings/token_type_embeddings")[0])
  x = _layer_norm(x, get, "bert/embeddings/LayerNorm", config["layer_norm_eps"])
  if get("bert/encoder/embedding_hidden_mapping_in/kernel") is not None:
    x = _dense(x, get, "bert/encoder/embedding_hidden_mapping_in")
  for i in range(config["num_hidden_layers"]):
    x = _block(x, get, f"bert/encoder/layer_{i}", config, act)
  return x, np.tanh(_dense(x[:1], get, "bert/pooler/dense"))[0]


def reference_logits(get, config, sequence, positions):
  """The decoupled output side's logits at `positions`, or None."""
  embedding = get("cls/predictions/output_embedding")
  if embedding is None:
    return None
  act = _activation(config.get("hidden_act", "gelu"))
  x = act(_dense(sequence[positions], get, "cls/predictions/transform/dense"))
  x = _layer_norm(x, get, "cls/predictions/transform/LayerNorm",
                  config["layer_norm_eps"])
  return x @ embedding.T + get("cls/predictions/output_bias")


def check_outputs(masked_lm, source_get, hf_get, config):
  """Largest |keras - source| per output; raises above --atol."""
  from keras import ops  # pylint: disable=g-import-not-at-top
  tokenizer = masked_lm.preprocessor.tokenizer
  room = min(len(SAMPLE), config["max_position_embeddings"]) - 2
  pieces = ops.convert_to_numpy(tokenizer(SAMPLE)).tolist()[:room]
  ids = np.array([tokenizer.cls_token_id] + pieces + [tokenizer.sep_token_id])
  positions = np.array([1, 2, len(ids) - 2])
  inputs = {"token_ids": ids[None].astype("int32"),
            "segment_ids": np.zeros([1, len(ids)], "int32"),
            "padding_mask": np.ones([1, len(ids)], "int32")}
  outputs = masked_lm.backbone(inputs)
  sequence, pooled = reference_encoder(source_get, config, ids)
  differences = {
      "sequence_output": np.abs(ops.convert_to_numpy(
          outputs["sequence_output"])[0] - sequence).max(),
      "pooled_output": np.abs(ops.convert_to_numpy(
          outputs["pooled_output"])[0] - pooled).max()}
  logits = reference_logits(hf_get, config, sequence, positions)
  if logits is not None:
    keras_logits = masked_lm({**inputs, "mask_positions": positions[None]})
    differences["mlm_logits"] = np.abs(
        ops.convert_to_numpy(keras_logits)[0] - logits).max()
  for name, difference in differences.items():
    print(f"max |keras - source| {name}: {difference:.2e}")
  worst = max(differences, key=differences.get)
  if differences[worst] > FLAGS.atol:
    raise ValueError(f"{worst} differs from the source by "
                     f"{differences[worst]:.2e} > --atol {FLAGS.atol}; the "
                     "conversion is wrong, nothing saved.")


def convert(hf_folder, source_get, output_dir):
  from rembert_tf import keras_hub as models  # pylint: disable=g-import-not-at-top
  from keras_hub.src.utils import preset_utils  # pylint: disable=g-import-not-at-top
  with open(preset_utils.get_file(hf_folder, "config.json"),
            encoding="utf-8") as f:
    config = json.load(f)
  masked_lm = models.RemBertMaskedLM.from_preset(hf_folder)
  print(f"loaded {hf_folder}: backbone {masked_lm.backbone.count_params()} "
        f"parameters, {masked_lm.count_params()} with the output side")
  hf_get = hf_tensors(hf_folder)
  check_outputs(masked_lm, source_get or hf_get, hf_get, config)
  staging = output_dir.rstrip("/") + ".partial"
  masked_lm.save_to_preset(staging)
  os.rename(staging, output_dir)
  print(f"wrote {output_dir}")


def main(argv):
  del argv
  output_dir = FLAGS.output_dir or os.path.join(".", FLAGS.preset)
  if os.path.exists(output_dir):
    raise ValueError(f"--output_dir {output_dir} exists; choose a new folder.")
  source = FLAGS.checkpoint or (PRESET_MAP[FLAGS.preset] if FLAGS.source == "hf"
                           else None)
  if source is None:
    raise ValueError("--source tf1 needs --checkpoint: the released checkpoint "
                     "(e.g. rembert/model.ckpt).")
  if FLAGS.source == "hf":
    convert(source, None, output_dir)
    return
  with tempfile.TemporaryDirectory() as tmp:
    hf_folder = os.path.join(tmp, "hf")
    tf1_to_hf(source, hf_folder)
    convert(hf_folder, tf1_tensors(source), output_dir)


def run(argv):
  """`main`, with a bad input as one line on stderr and exit code 1."""
  try:
    main(argv)
  except (ValueError, OSError) as e:
    print(f"convert_rembert_checkpoints: {e}", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
  flags.mark_flag_as_required("preset")
  try:
    app.run(run)
  except SystemExit as e:
    # absl ends --help with exit code 1; asked for, it is a success.
    if e.code == 1 and HELP_FLAGS & set(sys.argv[1:]):
      sys.exit(0)
    raise
