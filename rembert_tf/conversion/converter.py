"""Checkpoint conversion between the released TF1 layout, Hugging Face and rembert_tf.

`convert_checkpoint(from_format, to_format, input_path, output_dir, ...)`:

| from        | input                                                        |
| ----------- | ------------------------------------------------------------ |
| tf1         | TF1 name-based checkpoint prefix (or its directory) + JSON config |
| hf          | directory with config.json + model.safetensors (or shards)   |
| rembert_tf  | rembert_tf checkpoint directory or pre-training model_dir     |

| to          | output directory                                             |
| ----------- | ------------------------------------------------------------ |
| rembert_tf  | model_config.yaml, encoder/ckpt-0, [pretrainer/ckpt-0], [sentencepiece.model] |
| hf          | config.json, model.safetensors, [sentencepiece.model]        |

Every tensor goes through the canonical layout of `weight_layout`, one at a
time. Names and shapes are checked against the config before any tensor is
read: all mismatches come as one ConversionError. The output is written under
a temporary name and renamed when complete (`checkpoints.AtomicDirectory`),
so a failure leaves nothing under `output_dir`.

E_in == hidden: Hugging Face RemBERT always has `embedding_hidden_mapping_in`;
the rembert_tf encoder has no projection then. Writing HF stores an exact
identity (kernel I, bias 0, bit-exact outputs); reading accepts the
projection only if it is exactly that identity, and otherwise refuses (it
would be a learned layer the rembert_tf encoder cannot hold).

Builds on Model Garden's checkpoint conversion approach
(`official/nlp/tools/tf1_bert_checkpoint_converter_lib.py`: read the TF1
checkpoint by name, map names, assign into the TF2 model, save a
`tf.train.Checkpoint`), with a name table of its own for RemBERT.

Example:
```python
from rembert_tf.conversion import converter
converter.convert_checkpoint("tf1", "rembert_tf", "rembert/model.ckpt",
                             "converted/rembert", config="rembert/config.json",
                             sp_model="rembert/sentencepiece.model")
converter.convert_checkpoint("rembert_tf", "hf", "runs/pretrain", "hf/rembert")
```
"""
import pathlib
import time
from typing import Optional

import numpy as np
from absl import logging

from rembert_tf.modeling import checkpoints
from rembert_tf.modeling import rembert_encoder
from rembert_tf.modeling import rembert_pretrainer

from rembert_tf.conversion import config_json
from rembert_tf.conversion import special_tokens
from rembert_tf.conversion import tensor_sources
from rembert_tf.conversion import weight_layout

FROM_FORMATS = ("tf1", "hf", "rembert_tf")
TO_FORMATS = ("rembert_tf", "hf")
TF1_CONFIG_NAMES = ("config.json", "bert_config.json", "rembert_config.json")


def _default_tf1_config(input_path) -> Optional[pathlib.Path]:
  path = pathlib.Path(input_path)
  folder = path if path.is_dir() else path.parent
  for name in TF1_CONFIG_NAMES:
    if (folder / name).exists():
      return folder / name
  return None


def _open_source(from_format, input_path, config, sp_model, encoder_only):
  """-> (cfg, source, sp_model path or None)."""
  input_path = pathlib.Path(input_path)
  if from_format == "tf1":
    config = config or _default_tf1_config(input_path)
    if config is None:
      raise weight_layout.ConversionError(
          f"{input_path}: --from tf1 needs the checkpoint's JSON config "
          f"(--config); none of {', '.join(TF1_CONFIG_NAMES)} is beside it.")
    cfg = config_json.read_json_config(config)
    return cfg, tensor_sources.Tf1Source(input_path), sp_model
  if from_format == "hf":
    tensor_sources.refuse_pickle(input_path)
    folder = input_path if input_path.is_dir() else input_path.parent
    cfg = config_json.read_json_config(
        config or folder / tensor_sources.HF_CONFIG_FILE)
    source = tensor_sources.HfSource(input_path)
    if sp_model is None and (folder / checkpoints.SENTENCEPIECE_FILE).exists():
      sp_model = str(folder / checkpoints.SENTENCEPIECE_FILE)
    return cfg, source, sp_model
  if from_format == "rembert_tf":
    resolved = checkpoints.resolve(str(input_path))
    cfg = checkpoints.model_config_of(resolved, config)
    if not encoder_only and checkpoints.has_output_side(resolved):
      model = rembert_pretrainer.build_pretrainer(cfg)
      read_from = checkpoints.restore_pretrainer(model, resolved)
      slots = weight_layout.slots_for_pretrainer(model)
    else:
      model = rembert_encoder.build_encoder(cfg)
      read_from = checkpoints.restore_encoder(model, resolved)
      slots = weight_layout.slots_for_encoder(model)
    source = tensor_sources.ModelSource(
        slots, description=f"rembert_tf checkpoint {read_from}")
    return cfg, source, sp_model or resolved.sp_model
  raise weight_layout.ConversionError(
      f"--from {from_format!r}: expected one of {', '.join(FROM_FORMATS)}.")


POOLER_NAMES = ("bert/pooler/dense/kernel", "bert/pooler/dense/bias")


def _plan(cfg, source, to_format, encoder_only, allow_missing_pooler=False):
  """Checks names/shapes; -> (canonical names to convert, with_output_side)."""
  found = source.shapes()
  if encoder_only:
    found = {n: s for n, s in found.items()
             if not n.startswith(weight_layout.OUTPUT_SIDE_PREFIX)}
  with_output_side = any(n.startswith(weight_layout.OUTPUT_SIDE_PREFIX)
                         for n in found)
  if with_output_side and to_format == "hf" and cfg.num_output_layers:
    raise weight_layout.ConversionError(
        f"{source.description}: num_output_layers={cfg.num_output_layers}, but "
        "Hugging Face RemBERT has no extra output-side layers. Pass "
        "--encoder_only to convert the encoder alone.")
  same_width = cfg.input_embedding_size == cfg.hidden_size
  has_projection = weight_layout.PROJECTION_KERNEL in found
  drop_projection = False
  if same_width and has_projection and to_format == "rembert_tf":
    kernel = source.get(weight_layout.PROJECTION_KERNEL)
    bias = source.get(weight_layout.PROJECTION_BIAS) if (
        weight_layout.PROJECTION_BIAS in found) else np.zeros([0])
    if not weight_layout.is_identity_projection(kernel, bias):
      raise weight_layout.ConversionError(
          f"{source.description}: input_embedding_size == hidden_size "
          f"({cfg.hidden_size}) and {source.display(weight_layout.PROJECTION_KERNEL)} "
          "is a learned (non-identity) projection. The rembert_tf encoder has "
          "no E_in -> hidden projection when the widths are equal, so these "
          "weights cannot be represented without changing the outputs.")
    logging.info("Dropping the identity embedding_hidden_mapping_in "
                 "(E_in == hidden): the rembert_tf encoder has none.")
    drop_projection = True
    found = {n: s for n, s in found.items()
             if n not in (weight_layout.PROJECTION_KERNEL,
                          weight_layout.PROJECTION_BIAS)}
  expected = weight_layout.expected_canonical_shapes(
      cfg, with_projection=(not same_width) or (has_projection and not drop_projection),
      output_side=with_output_side)
  if allow_missing_pooler and not any(n in found for n in POOLER_NAMES):
    logging.warning("%s has no pooler (e.g. a RemBertForMaskedLM export): the "
                    "pooler keeps its fresh initialisation.", source.description)
    for name in POOLER_NAMES:
      expected.pop(name)
  weight_layout.check_names_and_shapes(
      source.description,
      {source.display(n): s for n, s in found.items()},
      {source.display(n): s for n, s in expected.items()},
      hint="Check that the config (num_hidden_layers, hidden_size, "
      "input_embedding_size, vocab_size, ...) is the one this checkpoint was "
      "trained with." + (
          " Only the pooler is missing? Hugging Face RemBertForMaskedLM "
          "checkpoints have none: pass --allow_missing_pooler to start it "
          "from a fresh initialisation."
          if all(n in expected and n not in found for n in POOLER_NAMES)
          else ""))
  return list(expected), with_output_side


def _progress(i, total, name, start):
  if i == total or i % 50 == 0 or i == 1:
    logging.info("[%d/%d] %s (%.1fs)", i, total, name, time.time() - start)


def _write_rembert_tf(cfg, source, names, with_output_side, output_dir,
                      sp_model, overwrite):
  if with_output_side:
    model = rembert_pretrainer.build_pretrainer(cfg)
    encoder = model.encoder
    slots = weight_layout.slots_for_pretrainer(model)
  else:
    model = None
    encoder = rembert_encoder.build_encoder(cfg)
    slots = weight_layout.slots_for_encoder(encoder)
  by_name = {s.name: s for s in slots}
  uncovered = sorted(set(by_name) - set(names) - set(POOLER_NAMES))
  if uncovered or set(names) - set(by_name):  # The plan and model must agree.
    raise weight_layout.ConversionError(
        "internal: plan and model disagree on " + ", ".join(
            uncovered + sorted(set(names) - set(by_name))))
  start = time.time()
  for i, name in enumerate(names, 1):
    by_name[name].assign(source.get(name))
    _progress(i, len(names), name, start)
  with checkpoints.AtomicDirectory(output_dir, overwrite=overwrite) as tmp:
    checkpoints.write_checkpoint_dir(tmp, cfg, encoder, model, sp_model)
  return model or encoder


def _write_hf(cfg, source, names, with_output_side, output_dir, sp_model,
              overwrite):
  from safetensors.numpy import save_file  # pylint: disable=g-import-not-at-top
  tensors = {}
  start = time.time()
  for i, name in enumerate(names, 1):
    hf, transpose = weight_layout.hf_name(name)
    array = source.get(name)
    tensors[hf] = np.ascontiguousarray(array.T if transpose else array)
    _progress(i, len(names), name, start)
  if weight_layout.PROJECTION_KERNEL not in names:
    # E_in == hidden: HF always has the projection; an exact identity.
    for name, array in weight_layout.identity_projection(cfg.hidden_size).items():
      hf, transpose = weight_layout.hf_name(name)
      tensors[hf] = np.ascontiguousarray(array.T if transpose else array)
  special_ids = special_tokens.hf_token_ids(sp_model) if sp_model else None
  with checkpoints.AtomicDirectory(output_dir, overwrite=overwrite) as tmp:
    save_file(tensors, str(tmp / tensor_sources.HF_WEIGHTS_FILE),
              metadata={"format": "pt"})
    config_json.write_hf_config(cfg, tmp / tensor_sources.HF_CONFIG_FILE,
                                with_output_side, special_ids)
    if sp_model:
      checkpoints.copy_sentencepiece(sp_model, str(tmp))
  return tensors


def convert_checkpoint(from_format: str, to_format: str, input_path,
                       output_dir, *, config=None, sp_model=None,
                       encoder_only: bool = False, overwrite: bool = False,
                       allow_missing_pooler: bool = False):
  """Converts a checkpoint; see the module docstring for formats.

  Args:
    from_format: "tf1", "hf" or "rembert_tf".
    to_format: "rembert_tf" or "hf".
    input_path: checkpoint prefix / directory (see module docstring).
    output_dir: the directory to create (must not exist unless overwrite).
    config: tf1: the JSON config (default: config.json beside the
      checkpoint); hf: overrides DIR/config.json; rembert_tf: a preset name
      or YAML path used when the directory has no model_config.yaml.
    sp_model: SentencePiece model to copy into the output (defaults to the
      input directory's sentencepiece.model for hf and rembert_tf).
    encoder_only: drop the output side even when the input has one.
    allow_missing_pooler: accept an input without `pooler.dense` (Hugging
      Face RemBertForMaskedLM has none); the pooler keeps its initialisation.
    overwrite: replace an existing output_dir (atomically).

  Returns:
    The output directory (str).

  Raises:
    ConversionError: listing every missing / unexpected / misshapen tensor,
      or the config problem; nothing is written then.
  """
  if to_format not in TO_FORMATS:
    raise weight_layout.ConversionError(
        f"--to {to_format!r}: expected one of {', '.join(TO_FORMATS)}.")
  output_dir = pathlib.Path(output_dir)
  if output_dir.exists() and not overwrite:
    raise FileExistsError(f"{output_dir} already exists; choose another "
                          "--output or pass --overwrite.")
  if sp_model is not None and not pathlib.Path(sp_model).exists():
    raise weight_layout.ConversionError(
        f"{sp_model}: SentencePiece model not found (--sp_model).")
  cfg, source, sp_model = _open_source(from_format, input_path, config,
                                       sp_model, encoder_only)
  if from_format == "tf1" and source.skipped_output_side:
    logging.info("Skipped %d output-side tensor(s) (undocumented names, not "
                 "needed for fine-tuning): %s", len(source.skipped_output_side),
                 ", ".join(sorted(source.skipped_output_side)[:10]))
  names, with_output_side = _plan(cfg, source, to_format, encoder_only,
                                  allow_missing_pooler)
  logging.info("Converting %d tensors from %s to %s (%s)", len(names),
               source.description, to_format,
               "encoder + output side" if with_output_side else "encoder only")
  if to_format == "rembert_tf":
    _write_rembert_tf(cfg, source, names, with_output_side, output_dir,
                      sp_model, overwrite)
  else:
    _write_hf(cfg, source, names, with_output_side, output_dir, sp_model,
              overwrite)
  logging.info("Wrote %s", output_dir)
  return str(output_dir)
