"""The pre-training record format: features, BERT masking, `metadata.json`.

Builds on BERT's record layout as Model Garden's
`official/nlp/data/create_pretraining_data.py` writes it (v2 feature names,
no next-sentence pairs; docs/data.md lists the features and `metadata.json`'s
fields). `pretraining_record_creation` writes the records.

Example:
```python
from rembert_tf.data import pretraining_record_format
spec = pretraining_record_format.parse_features(16, 4)
assert sorted(spec)[0] == "input_mask" and spec["masked_lm_ids"].shape == [4]
```
"""
import dataclasses
import json
import os
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.data import example_encoding
from rembert_tf.data import tokenizer

METADATA_FILE = "metadata.json"
FORMAT_NAME = "rembert_tf.pretraining_records"
FORMAT_VERSION = 1
LAYOUT_STATIC = "static"
LAYOUT_UNMASKED = "unmasked"
LAYOUTS = (LAYOUT_STATIC, LAYOUT_UNMASKED)
RECORD_SUFFIX = ".tfrecord"


class RecordsError(errors.RemBertError, ValueError):
  """Pre-training records or their metadata are missing or inconsistent."""


@dataclasses.dataclass(frozen=True)
class Masking:
  """How static masking chooses and replaces tokens (BERT's 80/10/10 by default)."""
  masked_lm_prob: float = 0.15
  mask_token_rate: float = 0.8
  random_token_rate: float = 0.1

  def check(self) -> "Masking":
    """Raises errors.UsageError naming the flag that is out of range."""
    if not 0 < self.masked_lm_prob <= 1:
      raise errors.UsageError(
          f"--masked_lm_prob must be in (0, 1], got {self.masked_lm_prob}.")
    require_in_range("mask_token_rate", self.mask_token_rate, 0, 1)
    require_in_range("random_token_rate", self.random_token_rate, 0, 1)
    if self.mask_token_rate + self.random_token_rate > 1:
      raise errors.UsageError(
          "--mask_token_rate + --random_token_rate must be at most 1, got "
          f"{self.mask_token_rate} + {self.random_token_rate}.")
    return self


def require_in_range(flag: str, value, low, high=None, why: str = "") -> None:
  """errors.UsageError naming `--flag` unless low <= value (<= high)."""
  if value < low or (high is not None and value > high):
    where = f">= {low}" if high is None else f"in [{low}, {high}]"
    raise errors.UsageError(f"--{flag} must be {where}{why}, got {value}.")


def shard_file_name(index: int, num_shards: int) -> str:
  return f"pretrain-{index:05d}-of-{num_shards:05d}{RECORD_SUFFIX}"


def read_metadata(directory: Union[str, os.PathLike]) -> Dict[str, Any]:
  """Reads DIR/metadata.json; RecordsError if missing or not rembert_tf's format."""
  path = fileio.join(directory, METADATA_FILE)
  if not fileio.exists(path) or fileio.isdir(path):
    raise RecordsError(
        f"{path} does not exist: pre-training records need their "
        f"{METADATA_FILE}. Make records with rembert-create-pretraining-data "
        "(or pretraining_record_creation.write_pretraining_records for "
        "fixtures).")
  try:
    meta = json.loads(fileio.read_text(path))
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise RecordsError(f"{path} is not valid JSON ({e}); recreate the records "
                       "with rembert-create-pretraining-data.") from None
  if meta.get("format") != FORMAT_NAME:
    raise RecordsError(f"{path}: field `format` is {meta.get('format')!r}, "
                       f"expected {FORMAT_NAME!r}.")
  for field in ("layout", "seq_length", "max_predictions_per_seq", "vocab_size"):
    if field not in meta:
      raise RecordsError(f"{path}: missing field `{field}`; recreate the "
                         "records with rembert-create-pretraining-data.")
  return meta


SEQUENCE_FEATURES = ("input_word_ids", "input_mask", "input_type_ids")
PREDICTION_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")


def parse_features(seq_length: int, max_predictions_per_seq: int,
                   masked: bool = True) -> Dict[str, Any]:
  """`tf.io.parse_example`'s spec of a record (the module doc's features)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  names = SEQUENCE_FEATURES + (PREDICTION_FEATURES if masked else ())
  return {n: tf.io.FixedLenFeature(
      [seq_length if n in SEQUENCE_FEATURES else max_predictions_per_seq],
      tf.float32 if n == "masked_lm_weights" else tf.int64) for n in names}

_STATIC_ENCODER = example_encoding.FixedShapeEncoder(
    list(SEQUENCE_FEATURES + PREDICTION_FEATURES[:-1]), PREDICTION_FEATURES[-1:])
_UNMASKED_ENCODER = example_encoding.FixedShapeEncoder(list(SEQUENCE_FEATURES))


def random_non_special_ids(rng: np.random.Generator, size,
                           special: tokenizer.SpecialTokens) -> np.ndarray:
  """Uniform ids of the vocabulary that are not special pieces (any id layout)."""
  excluded = sorted({i for i in special.as_dict().values() if i >= 0})
  draws = rng.integers(0, special.vocab_size - len(excluded), size=size)
  for special_id in excluded:
    draws = draws + (draws >= special_id)
  return draws


def mask_batch(ids: np.ndarray, content_lengths: np.ndarray,
               rng: np.random.Generator, *, special: tokenizer.SpecialTokens,
               max_predictions_per_seq: int, masking: Masking = Masking()):
  """BERT masking of a batch of `[CLS] content [SEP] <pad>...` rows (numpy):
  min(P, max(1, round(n * masked_lm_prob))) of a row's n content positions,
  chosen uniformly, replaced as `Masking` says. Returns (masked ids [b, S],
  positions [b, P] ascending, labels, weights), positions padded with 0."""
  n, seq_length = ids.shape
  p = max_predictions_per_seq
  k = np.minimum(np.minimum(p, content_lengths),
                 np.maximum(1, np.rint(content_lengths * masking.masked_lm_prob)
                            ).astype(np.int64))
  columns = np.arange(seq_length)[None, :]
  candidate = (columns >= 1) & (columns <= content_lengths[:, None])
  keys = np.where(candidate, rng.random((n, seq_length)), 2.0)
  width = min(p, seq_length)
  smallest = np.argpartition(keys, width - 1, axis=1)[:, :width]
  order = np.argsort(np.take_along_axis(keys, smallest, axis=1), axis=1)
  chosen = np.take_along_axis(smallest, order, axis=1)
  valid = np.arange(width)[None, :] < k[:, None]
  positions = np.sort(np.where(valid, chosen, seq_length), axis=1)
  positions = np.where(valid, positions, 0)
  if width < p:
    pad = np.zeros((n, p - width), dtype=positions.dtype)
    positions = np.concatenate([positions, pad], axis=1)
    valid = np.concatenate([valid, pad.astype(bool)], axis=1)
  labels = np.where(valid, np.take_along_axis(ids, positions, axis=1), 0)
  draws = rng.random((n, p))
  use_mask = valid & (draws < masking.mask_token_rate)
  use_random = valid & ~use_mask & (
      draws < masking.mask_token_rate + masking.random_token_rate)
  random_ids = random_non_special_ids(rng, (n, p), special)
  masked = ids.copy()
  rows = np.broadcast_to(np.arange(n)[:, None], (n, p))
  masked[rows[use_mask], positions[use_mask]] = special.mask_id
  masked[rows[use_random], positions[use_random]] = random_ids[use_random]
  return masked, positions, labels, valid.astype(np.float32)


def encode_sequences(contents: Sequence[Sequence[int]],
                     *,
                     seq_length: int,
                     max_predictions_per_seq: int,
                     special: tokenizer.SpecialTokens,
                     rng: Optional[np.random.Generator],
                     layout: str = LAYOUT_STATIC,
                     masking: Masking = Masking()) -> List[bytes]:
  """Content token-id lists -> `[CLS] ... [SEP]` padded, masked record bytes."""
  n = len(contents)
  if n == 0:
    return []
  contents = [np.asarray(c, dtype=np.int64) for c in contents]
  lengths = np.array([len(c) for c in contents], dtype=np.int64)
  if lengths.max() > seq_length - 2:
    raise RecordsError(f"a sequence of {lengths.max()} tokens does not fit "
                       f"seq_length {seq_length} with [CLS] and [SEP].")
  if lengths.min() < 1:
    raise RecordsError("a sequence has no content tokens.")
  ids = np.full((n, seq_length), special.pad_id, dtype=np.int64)
  flat = np.concatenate(contents)
  rows = np.repeat(np.arange(n), lengths)
  starts = np.cumsum(lengths) - lengths
  cols = np.arange(len(flat)) - np.repeat(starts, lengths) + 1
  ids[rows, cols] = flat
  ids[:, 0] = special.cls_id
  ids[np.arange(n), lengths + 1] = special.sep_id
  input_mask = (np.arange(seq_length)[None, :] < (lengths + 2)[:, None]).astype(
      np.int64)
  type_ids = np.zeros((n, seq_length), dtype=np.int64)
  if layout == LAYOUT_UNMASKED:
    return _UNMASKED_ENCODER.encode(dict(
        input_word_ids=ids, input_mask=input_mask, input_type_ids=type_ids))
  masked, positions, labels, weights = mask_batch(
      ids, lengths, rng, special=special,
      max_predictions_per_seq=max_predictions_per_seq, masking=masking)
  return _STATIC_ENCODER.encode(
      dict(input_word_ids=masked, input_mask=input_mask,
           input_type_ids=type_ids, masked_lm_positions=positions,
           masked_lm_ids=labels),
      dict(masked_lm_weights=weights))


def base_metadata(*, layout: str, seq_length: int, max_predictions_per_seq: int,
                  special: tokenizer.SpecialTokens,
                  masking: Masking = Masking()) -> Dict[str, Any]:
  """The shape, tokenizer and masking fields every metadata.json has."""
  if layout not in LAYOUTS:
    raise RecordsError(f"layout must be one of {LAYOUTS}, got {layout!r}.")
  return {
      "format": FORMAT_NAME,
      "format_version": FORMAT_VERSION,
      "layout": layout,
      "seq_length": int(seq_length),
      "max_predictions_per_seq": int(max_predictions_per_seq),
      "vocab_size": int(special.vocab_size),
      "special_ids": special.as_dict(),
      "masking": dict(dataclasses.asdict(masking),
                      max_predictions_per_seq=int(max_predictions_per_seq),
                      static=layout == LAYOUT_STATIC),
  }
