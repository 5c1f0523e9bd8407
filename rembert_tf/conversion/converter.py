"""Checkpoint conversion: the released TF1 layout, Hugging Face, rembert_tf, keras-hub.

`convert_checkpoint` reads one format and writes another (docs/conversion.md)
through `weight_layout`'s canonical layout, one tensor at a time (peak
memory: the target model plus one batch), after checking every name and
shape. Builds on Model Garden's `tf1_bert_checkpoint_converter_lib` (read
TF1 by name, map names, save a `tf.train.Checkpoint`).

Example:
<!-- snippet: not run: needs the released RemBERT checkpoint (a 2.3 GB download) -->
```python
from rembert_tf.conversion import converter
converter.convert_checkpoint("tf1", "rembert_tf", "rembert/model.ckpt",
                             "converted/rembert", config="rembert/config.json",
                             sp_model="rembert/sentencepiece.model",
                             with_output_side=True)
```
"""
import contextlib
from typing import Optional

import numpy as np
from absl import logging

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.common import progress
from rembert_tf.data import tokenizer
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.checkpoints import checkpoint_writing
from rembert_tf.checkpoints import checkpoint_restore
from rembert_tf.checkpoints import pretrainer_restore
from rembert_tf.checkpoints import checkpoint_snapshot
from rembert_tf.modeling import rembert_encoder
from rembert_tf.modeling import rembert_pretrainer

from rembert_tf.conversion import config_json
from rembert_tf.conversion import tensor_sources
from rembert_tf.conversion import weight_layout

FROM_FORMATS = ("tf1", "hf", "rembert_tf", "keras_hub")
TO_FORMATS = ("rembert_tf", "hf", "keras_hub")
# Keras 3 / keras-hub modules: the `keras` extra, needed by keras_hub only.
KERAS_MODULES = ("keras", "keras_hub", "h5py")
TF1_CONFIG_NAMES = ("config.json", "bert_config.json", "rembert_config.json")
POOLER_NAMES = ("bert/pooler/dense/kernel", "bert/pooler/dense/bias")


def _default_tf1_config(input_path: str) -> Optional[str]:
  folder = _checkpoint_folder(input_path)
  for name in TF1_CONFIG_NAMES:
    if fileio.isfile(fileio.join(folder, name)):
      return fileio.join(folder, name)
  return None


def _checkpoint_folder(input_path: str) -> str:
  """The folder of a TF1 checkpoint prefix (or the folder given)."""
  is_prefix = fileio.exists(input_path + ".index")
  return (fileio.dirname(input_path) if is_prefix or not fileio.isdir(input_path)
          else input_path)


def release_vocabulary_advice(input_path: str) -> str:
  """Where the released checkpoint's vocabulary is, and the flag that takes it."""
  beside = fileio.join(_checkpoint_folder(input_path),
                       checkpoint_layout.SENTENCEPIECE_FILE)
  if fileio.isfile(beside):
    return f"pass the release's vocabulary with --sentencepiece_model {beside}"
  return ("the released RemBERT's SentencePiece model "
          f"({checkpoint_layout.SENTENCEPIECE_FILE}) ships beside its "
          f"checkpoint ({beside} is missing): download it with the "
          "checkpoint and pass it with --sentencepiece_model")


def _check_tf1_inputs(input_path, config, sp_model) -> None:
  """Every missing input of a release conversion in one line, each with its
  origin; the vocabulary alone: where the release's own one is."""
  missing = []
  if not fileio.exists(input_path + ".index") and not fileio.isdir(input_path):
    missing.append(f"--checkpoint {input_path} (no {input_path}.index: the "
                   "release's model.ckpt.index and model.ckpt.data-* files)")
  if config is not None and not fileio.isfile(config):
    missing.append(f"--config {config} (no such file: the release's "
                   "config.json)")
  elif config is None and _default_tf1_config(input_path) is None:
    missing.append(f"--config (none of {', '.join(TF1_CONFIG_NAMES)} beside "
                   "the checkpoint: the release's config.json)")
  if sp_model is not None and not fileio.isfile(sp_model):
    missing.append(f"--sentencepiece_model {sp_model} (no such file: the "
                   f"release's {checkpoint_layout.SENTENCEPIECE_FILE})")
  if len(missing) == 1 and missing[0].startswith("--sentencepiece_model"):
    raise errors.UsageError(f"--sentencepiece_model {sp_model}: no such file; "
                            f"{release_vocabulary_advice(input_path)}.")
  if missing:
    raise errors.InputError(
        f"--from tf1 is missing {', '.join(missing)}; the released RemBERT "
        "ships these files together: download them into one folder (e.g. "
        "rembert/) and pass their paths.")


def _check_arguments(from_format, to_format, output_dir, overwrite,
                     encoder_only, with_output_side):
  """Everything that can be refused before a tensor is read."""
  if from_format not in FROM_FORMATS:
    raise errors.UsageError(
        f"--from {from_format!r}: expected one of {', '.join(FROM_FORMATS)}.")
  if to_format not in TO_FORMATS:
    raise errors.UsageError(
        f"--to {to_format!r}: expected one of {', '.join(TO_FORMATS)}.")
  if encoder_only and with_output_side:
    raise errors.UsageError(
        "--encoder_only and --with_output_side contradict each other; pass one.")
  fileio.check_output_location(output_dir)
  outputs.refuse_existing([output_dir], overwrite)  # before any work


def _open_source(from_format, input_path, config, cfg_hint_output_side):
  """-> (cfg, source, the input's own SentencePiece model or None)."""
  if from_format == "tf1":
    # _check_tf1_inputs refused a missing config.
    cfg = config_json.read_json_config(config or _default_tf1_config(input_path))
    source = tensor_sources.Tf1Source(input_path)
    if cfg_hint_output_side:
      source.add_output_side(cfg)
    elif source.outside_encoder:
      logging.info("Skipped %d output-side tensor(s) (pass --with_output_side "
                   "to convert them): %s", len(source.outside_encoder),
                   ", ".join(sorted(source.outside_encoder)[:10]))
    return cfg, source, None
  if from_format == "keras_hub":
    return _keras_hub_preset("--from").open_preset(input_path,
                                                   cfg_hint_output_side)
  if from_format == "hf":
    tensor_sources.refuse_pickle(input_path)
    folder = (input_path if fileio.isdir(input_path)
              else fileio.dirname(input_path))
    cfg = config_json.read_json_config(
        config or fileio.join(folder, tensor_sources.HF_CONFIG_FILE))
    source = tensor_sources.HfSource(input_path, cfg)
    own_sp = fileio.join(folder, checkpoint_layout.SENTENCEPIECE_FILE)
    return cfg, source, own_sp if fileio.isfile(own_sp) else None
  # A live model_dir's checkpoint is read from a copy held against the
  # trainer's rotation.
  with checkpoint_snapshot.held(input_path) as resolved:
    cfg = checkpoint_restore.model_config_of(resolved, config)
    model, encoder, slots = _model_and_slots(  # zeros: all restored below
        cfg, cfg_hint_output_side
        and pretrainer_restore.has_output_side(resolved))
    read_from = (pretrainer_restore.restore_pretrainer(model, resolved) if model
                 else checkpoint_restore.restore_encoder(encoder, resolved))
    source = tensor_sources.ModelSource(
        slots, description=(f"rembert_tf checkpoint {input_path} "
                            f"({fileio.basename(read_from)})"))
  return cfg, source, resolved.sp_model


def _plan(cfg, source, to_format, encoder_only, with_output_side,
          allow_missing_pooler=False):
  """Checks names/shapes; -> (canonical names to convert, with_output_side)."""
  found = source.shapes()
  if encoder_only:
    found = {n: s for n, s in found.items()
             if not n.startswith(weight_layout.OUTPUT_SIDE_PREFIX)}
  has_output_side = any(n.startswith(weight_layout.OUTPUT_SIDE_PREFIX)
                        for n in found)
  if with_output_side and not has_output_side:
    raise weight_layout.ConversionError(
        f"{source.description} has no output side (no MLM head); drop "
        "--with_output_side to convert the encoder alone.")
  if has_output_side and to_format != "rembert_tf" and cfg.num_output_layers:
    target = {"hf": "Hugging Face RemBERT",
              "keras_hub": "keras-hub's RemBertMaskedLM"}[to_format]
    raise weight_layout.ConversionError(
        f"{source.description}: num_output_layers={cfg.num_output_layers}, but "
        f"{target} has no extra output-side layers. Pass "
        "--encoder_only to convert the encoder alone.")
  found = _without_identity_projection(cfg, source, found, to_format)
  expected = weight_layout.expected_canonical_shapes(
      cfg, with_projection=(cfg.input_embedding_size != cfg.hidden_size
                            or weight_layout.PROJECTION_KERNEL in found),
      output_side=has_output_side)
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
  return list(expected), has_output_side


def _without_identity_projection(cfg, source, found, to_format):
  """E_in == hidden: drops an exact-identity projection (the encoder has none)."""
  same_width = cfg.input_embedding_size == cfg.hidden_size
  if not (same_width and weight_layout.PROJECTION_KERNEL in found
          and to_format in ("rembert_tf", "keras_hub")):
    return found
  kernel = np.asarray(source.get(weight_layout.PROJECTION_KERNEL))
  bias = np.asarray(source.get(weight_layout.PROJECTION_BIAS)) if (
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
  return {n: s for n, s in found.items()
          if n not in (weight_layout.PROJECTION_KERNEL,
                       weight_layout.PROJECTION_BIAS)}


def _model_and_slots(cfg, with_output_side, zeros=True):
  """(pretrainer or None, encoder, canonical slots); `zeros` when every
  variable is assigned next (zero_initialized_variables)."""
  with (checkpoint_restore.zero_initialized_variables() if zeros
        else contextlib.nullcontext()):
    if with_output_side:
      model = rembert_pretrainer.build_pretrainer(cfg)
      return model, model.encoder, weight_layout.slots_for_pretrainer(model)
    encoder = rembert_encoder.build_encoder(cfg)
    return None, encoder, weight_layout.slots_for_encoder(encoder)


def _write_rembert_tf(cfg, source, names, with_output_side, folder, _):
  model, encoder, slots = _model_and_slots(
      cfg, with_output_side, zeros=POOLER_NAMES[0] in names)
  by_name = {s.name: s for s in slots}
  with progress.Progress("reading tensors", total=len(names),
                         unit="tensors") as bar:
    for name, value in source.read(names):
      by_name[name].assign(value)
      del value  # nothing holds it while the next batch is read
      bar.update(1)
  source.close()  # a rembert_tf source holds a model: free it before saving
  checkpoint_writing.write_checkpoint_dir(folder, cfg, encoder, model)


def _write_hf(cfg, source, names, with_output_side, folder, sp_model):
  """model.safetensors (streamed in Hugging Face names' order), config.json."""
  identity = {}
  if weight_layout.PROJECTION_KERNEL not in names:
    # E_in == hidden: HF always has the projection; an exact identity.
    identity = {
        weight_layout.PROJECTION_KERNEL: np.eye(cfg.hidden_size,
                                                dtype=np.float32),
        weight_layout.PROJECTION_BIAS: np.zeros([cfg.hidden_size], np.float32)}
  # (HF name, transposed?, canonical name) in the writer's order.
  order = sorted((*weight_layout.hf_name(n), n) for n in [*names, *identity])
  source_shapes = source.shapes()
  shapes = {}
  for hf, transposed, name in order:
    shape = tuple(identity[name].shape if name in identity
                  else source_shapes[name])
    shapes[hf] = shape[::-1] if transposed else shape

  def tensors():
    """(HF name, array) in the writer's order, read from the source in batches."""
    stream = source.read([n for _, _, n in order if n not in identity])
    for hf, transposed, name in order:
      array = identity[name] if name in identity else np.asarray(
          next(stream)[1])
      yield hf, array.T if transposed else array
      del array  # nothing holds it while the next batch is read

  special = tokenizer.SpecialTokens.from_model(sp_model) if sp_model else None
  with progress.Progress("writing model.safetensors", total=len(shapes),
                         unit="tensors") as bar:
    tensor_sources.write_safetensors(
        fileio.join(folder, tensor_sources.HF_WEIGHTS_FILE), shapes, tensors(),
        metadata={"format": "pt"}, progress=lambda *_: bar.update(1))
  config_json.write_hf_config(
      cfg, fileio.join(folder, tensor_sources.HF_CONFIG_FILE), with_output_side,
      special)


def _keras_hub_preset(flag: str):
  """The keras-hub preset module, imported only here: Keras 3 is an extra."""
  try:
    from rembert_tf.conversion import keras_hub_preset  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    if e.name not in KERAS_MODULES:
      raise
    raise errors.UsageError(
        f"{flag} keras_hub needs Keras 3 and keras-hub ({e.name} is not "
        "installed); install the extra (Python 3.11+): pip install "
        "'rembert_tf[keras]'."
    ) from None
  return keras_hub_preset


@outputs.writes_output("output_dir")
def convert_checkpoint(from_format: str, to_format: str, input_path,
                       output_dir, *, config=None, sp_model=None,
                       encoder_only: bool = False,
                       with_output_side: bool = False,
                       overwrite: bool = False,
                       allow_missing_pooler: bool = False) -> str:
  """Converts a checkpoint into `output_dir`, swapped in when complete; returns it.

  The arguments are `rembert-convert`'s flags (`sp_model`:
  --sentencepiece_model, default the input's own). Raises ConversionError
  listing every missing / unexpected / misshapen tensor or the config
  problem, and errors.UsageError / OutputExistsError before any work.
  """
  input_path, output_dir = fileio.as_str(input_path), fileio.as_str(output_dir)
  _check_arguments(from_format, to_format, output_dir, overwrite, encoder_only,
                   with_output_side)
  if from_format == "tf1":  # every missing input of a release in one line
    _check_tf1_inputs(input_path, config, sp_model)
  if sp_model is not None:
    tokenizer.SpecialTokens.from_model(sp_model)  # refuses any other file
  read_output_side = with_output_side or (from_format != "tf1"
                                          and not encoder_only)
  cfg, source, own_sp_model = _open_source(from_format, input_path, config,
                                           read_output_side)
  with contextlib.closing(source):
    if sp_model is None and own_sp_model is not None:
      tokenizer.SpecialTokens.from_model(own_sp_model)
      sp_model = own_sp_model
    names, has_output_side = _plan(cfg, source, to_format, encoder_only,
                                   with_output_side, allow_missing_pooler)
    logging.info("Converting %d tensors from %s to %s (%s)", len(names),
                 source.description, to_format,
                 "encoder + output side" if has_output_side else "encoder only")
    write = (_keras_hub_preset("--to").write_preset if to_format == "keras_hub"
             else {"rembert_tf": _write_rembert_tf, "hf": _write_hf}[to_format])
    with outputs.atomic_directory(output_dir, overwrite=overwrite) as tmp:
      write(cfg, source, names, has_output_side, tmp, sp_model)
      if sp_model and to_format != "keras_hub":  # a preset keeps it as an asset
        tokenizer.copy_sentencepiece(
            sp_model, fileio.join(tmp, checkpoint_layout.SENTENCEPIECE_FILE))
  logging.info("Wrote %s", output_dir)
  return output_dir
