"""The pre-training input pipeline: record shards -> static-shape batches.

Builds on Model Garden's `InputReader` and follows its
`BertPretrainDataLoader`, registered with its `data_loader_factory`; parses a
batch at a time and can mask dynamically with tensorflow-text's
`mask_language_model`. Each load first checks `metadata.json` and the first
record of each shard: a fault is one `DataMismatchError` line.
"""
import dataclasses
from typing import Any, Dict, List, Optional

from absl import logging
import tensorflow as tf
from official.core import config_definitions as cfg
from official.core import input_reader
from official.nlp.data import data_loader
from official.nlp.data import data_loader_factory

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.data import pretraining_record_format
from rembert_tf.data import tokenizer

# Files are shuffled with this seed when several input pipelines read
# disjoint file shards and no seed is configured: every host must shuffle the
# file list the same way before taking its shard.
_DEFAULT_MULTI_HOST_FILE_SEED = 2021
# How errors name a data config the caller does not name (the experiment's
# task names its own: `task.train_data`, `task.validation_data`).
DATA_CONFIG = "RemBertPretrainDataConfig"


class DataMismatchError(errors.RemBertError, ValueError):
  """No records match `input_path`, or they (their metadata.json, a shard's
  records) do not match the data or model config."""


@dataclasses.dataclass
class RemBertPretrainDataConfig(cfg.DataConfig):
  """Data config of RemBERT pre-training (Model Garden DataConfig).

  Attributes:
    input_path: glob(s) of record shards, comma-separated or a list.
    max_predictions_per_seq: P (static layout: the records'; dynamic: any).
    use_dynamic_masking: mask in the pipeline (records in the unmasked layout),
      at the rates masked_lm_prob, mask_token_rate, random_token_rate.
    vocab_size: 0 reads it from metadata.json; else it must match it.
    check_metadata: read and check metadata.json (off: every field set here).
  """
  input_path: str = ""
  global_batch_size: int = 512
  is_training: bool = True
  seq_length: int = 512
  max_predictions_per_seq: int = 76
  use_dynamic_masking: bool = False
  masked_lm_prob: float = 0.15
  mask_token_rate: float = 0.8
  random_token_rate: float = 0.1
  vocab_size: int = 0
  check_metadata: bool = True
  drop_remainder: bool = True
  shuffle_buffer_size: int = 10000
  file_type: str = "tfrecord"


def _input_patterns(input_path) -> List[str]:
  """Globs of `input_path`: comma-separated, or a list."""
  patterns = [input_path] if isinstance(input_path, str) else input_path
  return [p.strip() for pattern in patterns for p in pattern.split(",")
          if p.strip()]


def input_files(input_path) -> List[str]:
  """The files `input_path` (globs, comma-separated or a list) matches."""
  return [f for pattern in _input_patterns(input_path)
          for f in sorted(fileio.glob(pattern))]


def record_files(params: RemBertPretrainDataConfig,
                 field: str = DATA_CONFIG) -> List[str]:
  """The shard files `input_path` matches; DataMismatchError naming `field`
  (the data config's name in the experiment) if it is empty or a glob
  matches none."""
  patterns = _input_patterns(params.input_path)
  if not patterns:
    raise DataMismatchError(
        f"{field}.input_path is empty: set it to the records' glob (e.g. "
        f"{field}.input_path=/data/records/*.tfrecord).")
  files = []
  for pattern in patterns:
    matched = sorted(fileio.glob(pattern))
    if not matched:
      raise DataMismatchError(
          f"{field}.input_path {pattern!r} matches no files. Make the records "
          "first (rembert-create-pretraining-data) or fix the path.")
    files.extend(matched)
  return files


def _records_metadata(files: List[str]) -> List[Dict[str, Any]]:
  """metadata.json of every directory the shards are in (each with `_path`),
  each shard it lists checked to be there."""
  metas = []
  for directory in sorted({fileio.dirname(f) for f in files}):
    try:
      meta = pretraining_record_format.read_metadata(directory)
    except pretraining_record_format.RecordsError as e:
      raise DataMismatchError(
          f"{e} (Set check_metadata=False only for records made by other "
          "tools.)") from None
    meta["_path"] = fileio.join(directory,
                                pretraining_record_format.METADATA_FILE)
    # Training on part of the records would silently skip data.
    missing = [shard["file"] for shard in meta.get("shards", [])
               if isinstance(shard, dict) and "file" in shard
               and not fileio.exists(fileio.join(directory, shard["file"]))]
    if missing:
      raise DataMismatchError(
          f"{meta['_path']}: field `shards` lists {len(missing)} file(s) "
          f"missing from {directory}: {', '.join(missing[:5])}"
          f"{' ...' if len(missing) > 5 else ''}. Copy them back or recreate "
          "the records (rembert-create-pretraining-data --overwrite); training "
          "on part of the records would silently skip their data.")
    metas.append(meta)
  return metas


def _check_metadata(meta: Dict[str, Any], params: RemBertPretrainDataConfig,
                    model_cfg) -> None:
  """DataMismatchError naming metadata.json, the field, both values and the
  fix, where the records do not fit the data config (or the model config)."""
  dynamic = params.use_dynamic_masking
  layout = (pretraining_record_format.LAYOUT_UNMASKED if dynamic
            else pretraining_record_format.LAYOUT_STATIC)
  # (wrong, field, what it must equal, its value, the fix)
  checks = [
      (meta["seq_length"] != params.seq_length, "seq_length",
       "data config seq_length", params.seq_length,
       f"set the data config's seq_length to {meta['seq_length']} or "
       f"recreate the records with --seq_length={params.seq_length}."),
      (meta["layout"] != layout, "layout",
       f"the layout the data config (use_dynamic_masking={dynamic}) reads",
       layout,
       "recreate the records with --unmasked, or set use_dynamic_masking="
       "False to use their static masks." if dynamic else
       "set use_dynamic_masking=True for unmasked records, or recreate them "
       "without --unmasked."),
      (not dynamic and meta["max_predictions_per_seq"] !=
       params.max_predictions_per_seq, "max_predictions_per_seq",
       "data config max_predictions_per_seq", params.max_predictions_per_seq,
       "set the data config's max_predictions_per_seq to "
       f"{meta['max_predictions_per_seq']} or recreate the records with "
       f"--max_predictions_per_seq={params.max_predictions_per_seq}."),
      (params.vocab_size and meta["vocab_size"] != params.vocab_size,
       "vocab_size", "data config vocab_size", params.vocab_size,
       "use the SentencePiece model the records were made with, or "
       "recreate the records with a model of this vocabulary size.")]
  if model_cfg is not None:
    checks += [
        (meta["vocab_size"] != model_cfg.vocab_size, "vocab_size",
         "model config vocab_size", model_cfg.vocab_size,
         "make the records with a SentencePiece model of vocab_size "
         f"{model_cfg.vocab_size}, or set the model config's vocab_size to "
         f"{meta['vocab_size']}."),
        (meta["seq_length"] > model_cfg.max_position_embeddings,
         "seq_length", "model config max_position_embeddings",
         model_cfg.max_position_embeddings,
         "recreate the records with --seq_length <= "
         f"{model_cfg.max_position_embeddings}.")]
  for wrong, field, other, other_value, fix in checks:
    if wrong:
      raise DataMismatchError(
          f"{meta['_path']}: field `{field}` is {meta[field]!r} but {other} "
          f"is {other_value!r}. Fix: {fix}")


# Record features whose length the data config fixes (the unmasked layout
# has no masked_lm_positions).
_FIXED_LENGTHS = (("input_word_ids", "seq_length"),
                  ("masked_lm_positions", "max_predictions_per_seq"))


def shard_of_other_shape(params: RemBertPretrainDataConfig,
                         files: Optional[List[str]] = None) -> Optional[str]:
  """The first shard whose first record has features of other lengths than
  `params` reads, described; None if every shard's fits. One record a shard:
  no pass over the data. `files`: the shards, when globbed already."""
  for path in input_files(params.input_path) if files is None else files:
    for raw in tf.data.TFRecordDataset(path).take(1):
      features = tf.train.Example.FromString(raw.numpy()).features.feature
      for name, field in _FIXED_LENGTHS:
        wanted = getattr(params, field)
        if name in features and (
            len(features[name].int64_list.value) != wanted):
          return (f"{path} holds records whose {name} has "
                  f"{len(features[name].int64_list.value)} values; the "
                  f"experiment reads {wanted} ({field})")
  return None


def unreadable_shard(params: RemBertPretrainDataConfig) -> Optional[str]:
  """The first shard that does not read to its end, with the reader's
  message; None if all read. Reads every shard: for the error path only."""
  for path in input_files(params.input_path):
    try:
      for _ in tf.data.TFRecordDataset(path):
        pass
    except tf.errors.OpError as e:
      return f"{path} ({errors.one_line(e.message).split(' [Op:')[0]})"
  return None


@data_loader_factory.register_data_loader_cls(RemBertPretrainDataConfig)
class RemBertPretrainDataLoader(data_loader.DataLoader):
  """Loads RemBERT pre-training batches (static or dynamic masking)."""

  def __init__(self, params: RemBertPretrainDataConfig, model_config=None,
               field: str = DATA_CONFIG):
    """`model_config` (a RemBertConfig): the records must fit it too;
    `field`: the data config's name in errors (`task.train_data`)."""
    self._params = params
    self._model_config = model_config
    self._field = field
    if (params.use_dynamic_masking and
        params.mask_token_rate + params.random_token_rate > 1.0):
      raise DataMismatchError(
          "data config fields `mask_token_rate` + `random_token_rate` must "
          f"be <= 1, got {params.mask_token_rate} + "
          f"{params.random_token_rate}.")
    # The records' metadata.json names the special ids of the SentencePiece
    # model they were made with; without it, this project's layout.
    self._special = tokenizer.SpecialTokens(vocab_size=params.vocab_size,
                                            **tokenizer.special_ids())

  def _check_records(self, files: List[str]) -> None:
    """The records' metadata (against the data config, and the model config
    when given) and the first record of each shard (`files`); the special
    ids and vocabulary size they were made with."""
    metas = _records_metadata(files)
    for meta in metas:
      _check_metadata(meta, self._params, self._model_config)
    vocab_sizes = {m["vocab_size"] for m in metas}
    if len(vocab_sizes) > 1:
      raise DataMismatchError(
          "the record directories in `input_path` disagree on field "
          f"`vocab_size` ({', '.join(m['_path'] for m in metas)}: "
          f"{sorted(vocab_sizes)}); read records of one tokenizer only.")
    other = shard_of_other_shape(self._params, files)
    if other:
      raise DataMismatchError(
          f"{self._field}.input_path: record shard {other}. Move it out of "
          "the records' folder, or make every shard with the same "
          "--seq_length and --max_predictions_per_seq.")
    self._special = tokenizer.SpecialTokens(
        vocab_size=self._special.vocab_size or metas[0]["vocab_size"],
        **metas[0].get("special_ids", self._special.as_dict()))

  def _parse_batch(self, serialized: tf.Tensor) -> Dict[str, tf.Tensor]:
    params = self._params
    features = pretraining_record_format.parse_features(
        params.seq_length, params.max_predictions_per_seq,
        masked=not params.use_dynamic_masking)
    parsed = tf.io.parse_example(serialized, features)
    batch = {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t
             for name, t in parsed.items()}
    if params.use_dynamic_masking:
      batch.update(self._dynamic_mask(batch["input_word_ids"],
                                      batch["input_mask"]))
    return batch

  def _dynamic_mask(self, word_ids: tf.Tensor, input_mask: tf.Tensor):
    import tensorflow_text as text  # pylint: disable=g-import-not-at-top
    params, special = self._params, self._special
    batch_size, static_batch = tf.shape(word_ids)[0], word_ids.shape[0]
    p = params.max_predictions_per_seq
    ragged = tf.RaggedTensor.from_tensor(
        word_ids, lengths=tf.reduce_sum(input_mask, axis=1))
    selector = text.RandomItemSelector(
        max_selections_per_batch=p, selection_rate=params.masked_lm_prob,
        unselectable_ids=list(special.unmaskable_ids))
    chooser = text.MaskValuesChooser(
        special.vocab_size, special.mask_id,
        mask_token_rate=params.mask_token_rate,
        random_token_rate=params.random_token_rate)
    masked_ids, positions, labels = text.mask_language_model(
        ragged, item_selector=selector, mask_values_chooser=chooser)
    out = {
        "input_word_ids": masked_ids.to_tensor(
            default_value=special.pad_id,
            shape=[batch_size, params.seq_length]),
        "masked_lm_positions": tf.cast(
            positions.to_tensor(default_value=0, shape=[batch_size, p]),
            tf.int32),
        "masked_lm_ids": tf.cast(
            labels.to_tensor(default_value=0, shape=[batch_size, p]), tf.int32),
        "masked_lm_weights": tf.ones_like(positions, dtype=tf.float32).to_tensor(
            default_value=0.0, shape=[batch_size, p]),
    }
    for name, t in out.items():
      t.set_shape([static_batch, params.seq_length
                   if name == "input_word_ids" else p])
    return out

  def _batch_and_parse(self, dataset: tf.data.Dataset,
                       input_context: Optional[tf.distribute.InputContext]):
    batch_size = self._params.global_batch_size
    if input_context:
      batch_size = input_context.get_per_replica_batch_size(batch_size)
    dataset = dataset.batch(batch_size,
                            drop_remainder=self._params.drop_remainder)
    return dataset.map(self._parse_batch,
                       num_parallel_calls=tf.data.AUTOTUNE,
                       deterministic=self._params.deterministic)

  def load(self, input_context: Optional[tf.distribute.InputContext] = None
           ) -> tf.data.Dataset:
    """Returns the batched dataset (one input pipeline's share)."""
    params = self._params
    if params.global_batch_size <= 0:
      raise DataMismatchError(
          f"{self._field}.global_batch_size must be > 0, got "
          f"{params.global_batch_size}.")
    # Globbed once here for every check (a listing of gs:// each time).
    files = record_files(params, self._field)
    if params.check_metadata:
      self._check_records(files)
    if params.use_dynamic_masking and not self._special.vocab_size:
      raise DataMismatchError(
          "data config field `vocab_size` is 0 and check_metadata is False: "
          "dynamic masking needs the vocabulary size; set vocab_size.")
    if (params.is_training and params.seed is None and input_context and
        input_context.num_input_pipelines > 1):
      params = params.replace(seed=_DEFAULT_MULTI_HOST_FILE_SEED)
    if input_context is not None and params.is_training:
      logging.info("training input: pipeline %d of %d (%d replicas), seed %s",
                   input_context.input_pipeline_id,
                   input_context.num_input_pipelines,
                   input_context.num_replicas_in_sync, params.seed)
    reader = input_reader.InputReader(
        params=params,
        dataset_fn=tf.data.TFRecordDataset,
        transform_and_batch_fn=self._batch_and_parse)
    return reader.read(input_context)
