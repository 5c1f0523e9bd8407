"""The project's pre-training records as `(x, y, sample_weight)` for RemBertMaskedLM.fit.

Reads the shards of `rembert-create-pretraining-data` with tf.data (no Model
Garden: this runs beside Keras 3) into what keras-hub's
`MaskedLMPreprocessor` yields (`_INPUT_NAMES`), in static-shape batches of
the layout `metadata.json` gives; other layouts are refused (`RecordsError`).

Example (records written here with the project's writer):
<!-- snippet: not run: needs the `[keras]` extra (Keras 3, keras-hub) -->
```python
from rembert_tf.data import pretraining_record_creation
from rembert_tf.keras_hub import pretraining_records
pretraining_record_creation.write_pretraining_records(
    "/tmp/records", [[10, 11, 12, 13], [20, 21, 22]] * 16, seq_length=16,
    max_predictions_per_seq=4, vocab_size=2000)
dataset = pretraining_records.read_records("/tmp/records/*.tfrecord",
                                           batch_size=8)
x, y, sample_weight = next(iter(dataset))
x["token_ids"].shape, y.shape      # (8, 16), (8, 4)
```
"""
from typing import Any, Dict, List, Optional, Sequence, Union

import tensorflow as tf

from rembert_tf.common import fileio
from rembert_tf.data import pretraining_record_format as record_format

RecordsError = record_format.RecordsError
_WORD_IDS, _MASK, _TYPE_IDS = record_format.SEQUENCE_FEATURES
_POSITIONS, _LABELS, _WEIGHTS = record_format.PREDICTION_FEATURES
# keras-hub's input names (RemBertBackbone + RemBertMaskedLM) of each feature.
_INPUT_NAMES = {_WORD_IDS: "token_ids", _TYPE_IDS: "segment_ids",
                _MASK: "padding_mask", _POSITIONS: "mask_positions"}
_SHUFFLE_BUFFER = 10_000


def _patterns(records_glob: Union[str, Sequence[str]]) -> List[str]:
  if isinstance(records_glob, str):
    return [p for p in records_glob.split(",") if p]
  return [str(p) for p in records_glob]


def records_metadata(records_glob: Union[str, Sequence[str]]
                     ) -> Dict[str, Any]:
  """The shards' metadata.json (all folders alike), checked to be the static layout."""
  metas = [record_format.read_metadata(fileio.dirname(p))
           for p in _patterns(records_glob)]
  meta = metas[0]
  for other, pattern in zip(metas[1:], _patterns(records_glob)[1:]):
    for field in ("layout", "seq_length", "max_predictions_per_seq"):
      if other[field] != meta[field]:
        raise RecordsError(
            f"{fileio.dirname(pattern)}/{record_format.METADATA_FILE}: "
            f"{field} is {other[field]}, the first folder's is {meta[field]}; "
            "train from records of one shape.")
  if meta["layout"] != record_format.LAYOUT_STATIC:
    raise RecordsError(
        f"{fileio.dirname(_patterns(records_glob)[0])}/"
        f"{record_format.METADATA_FILE}: layout is {meta['layout']!r}; "
        "RemBertMaskedLM trains from records masked when written: make them "
        "without --unmasked.")
  return meta


def record_files(records_glob: Union[str, Sequence[str]]) -> List[str]:
  """The shard files the glob(s) match; RecordsError when none."""
  files = sorted(f for p in _patterns(records_glob) for f in fileio.glob(p))
  if not files:
    raise RecordsError(f"{records_glob}: matches no record file; pass the "
                       "shards' glob, e.g. DIR/pretrain-*.tfrecord.")
  return files


def _to_fit_arguments(features: Dict[str, tf.Tensor]):
  x = {name: tf.cast(features[key], tf.int32)
       for key, name in _INPUT_NAMES.items()}
  return (x, tf.cast(features[_LABELS], tf.int32),
          tf.cast(features[_WEIGHTS], tf.float32))


def read_records(records_glob: Union[str, Sequence[str]], batch_size: int, *,
                 shuffle: bool = True, repeat: bool = True,
                 seed: Optional[int] = None) -> tf.data.Dataset:
  """A dataset of `(x, y, sample_weight)` batches of `batch_size` examples.

  Args:
    records_glob: glob(s) of record shards (comma-separated or a list), with
      the records' metadata.json in each glob's folder.
    batch_size: the global batch (DataParallel splits it over the devices).
    shuffle: shuffle the files and the records (a buffer of 10,000).
    repeat: cycle forever (`fit` then needs `steps_per_epoch`).
    seed: the shuffles' seed.
  """
  meta = records_metadata(records_glob)
  files = record_files(records_glob)
  s, p = meta["seq_length"], meta["max_predictions_per_seq"]
  spec = record_format.parse_features(s, p)
  dataset = tf.data.Dataset.from_tensor_slices(files)
  if shuffle:
    dataset = dataset.shuffle(len(files), seed=seed)
  dataset = dataset.interleave(tf.data.TFRecordDataset,
                               num_parallel_calls=tf.data.AUTOTUNE,
                               deterministic=seed is not None or not shuffle)
  if shuffle:
    dataset = dataset.shuffle(_SHUFFLE_BUFFER, seed=seed)
  if repeat:
    dataset = dataset.repeat()
  dataset = dataset.batch(batch_size, drop_remainder=True)
  dataset = dataset.map(lambda serialized: _to_fit_arguments(
      tf.io.parse_example(serialized, spec)),
                        num_parallel_calls=tf.data.AUTOTUNE)
  return dataset.prefetch(tf.data.AUTOTUNE)
