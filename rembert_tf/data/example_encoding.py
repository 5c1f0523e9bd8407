"""`tf.train.Example` protos of fixed-length features, encoded without TensorFlow.

Writes the protobuf wire bytes directly (packed varints through numpy), so
record workers need neither TensorFlow nor a protobuf object per record.

Example:
```python
import numpy as np
from rembert_tf.data import example_encoding
record = example_encoding.encode_example(
    int_features={"input_word_ids": np.array([2, 17, 3, 0])},
    float_features={"masked_lm_weights": np.array([1.0, 0.0])})
```
"""
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

_MAX_VARINT_BYTES = 10


def encode_varint(value: int) -> bytes:
  """Protobuf varint of a non-negative Python int."""
  out = bytearray()
  while True:
    byte = value & 0x7F
    value >>= 7
    if value:
      out.append(byte | 0x80)
    else:
      out.append(byte)
      return bytes(out)


_SMALL_VARINTS = [encode_varint(i) for i in range(1 << 14)]


def _len_prefix(n: int) -> bytes:
  return _SMALL_VARINTS[n] if n < (1 << 14) else encode_varint(n)


# Varint bytes of every value below the table's size (grown on demand up to
# _TABLE_LIMIT, enough for a 250k vocabulary): a join of table entries is the
# fastest way to pack token ids from Python.
_TABLE_LIMIT = 1 << 18
_VARINT_TABLE: list = []


def _varint_table(max_value: int) -> list:
  if len(_VARINT_TABLE) <= max_value:
    _VARINT_TABLE.extend(encode_varint(i) for i in range(
        len(_VARINT_TABLE), min(_TABLE_LIMIT, max(2 * max_value, 4096))))
  return _VARINT_TABLE


def packed_varints(values: np.ndarray) -> bytes:
  """Packed varint bytes of a 1-D array of int64 (negatives as 10-byte two's complement)."""
  values = np.asarray(values, dtype=np.int64)
  if values.size == 0:
    return b""
  low, high = int(values.min()), int(values.max())
  if low >= 0 and high < 128:
    return values.astype(np.uint8).tobytes()
  if low >= 0 and high < _TABLE_LIMIT:
    table = _varint_table(high)
    return b"".join([table[v] for v in values.tolist()])
  unsigned = values.astype(np.uint64)
  shifts = np.arange(_MAX_VARINT_BYTES, dtype=np.uint64) * np.uint64(7)
  groups = (unsigned[:, None] >> shifts[None, :]) & np.uint64(0x7F)
  # Number of bytes: 1 + index of the last non-zero 7-bit group.
  nonzero = groups != 0
  num_bytes = np.where(nonzero.any(axis=1),
                       _MAX_VARINT_BYTES - np.argmax(nonzero[:, ::-1], axis=1),
                       1)
  positions = np.arange(_MAX_VARINT_BYTES)[None, :]
  keep = positions < num_bytes[:, None]
  continuation = positions < (num_bytes[:, None] - 1)
  encoded = (groups | (continuation.astype(np.uint64) << np.uint64(7)))
  return encoded[keep].astype(np.uint8).tobytes()


def _feature_entry(name: bytes, feature_field_tag: bytes, payload: bytes) -> bytes:
  list_message = b"\x0a" + _len_prefix(len(payload)) + payload
  feature = feature_field_tag + _len_prefix(len(list_message)) + list_message
  entry = (b"\x0a" + _len_prefix(len(name)) + name +
           b"\x12" + _len_prefix(len(feature)) + feature)
  return b"\x0a" + _len_prefix(len(entry)) + entry


_INT64_LIST_TAG = b"\x1a"  # Feature.int64_list = 3, length-delimited.
_FLOAT_LIST_TAG = b"\x12"  # Feature.float_list = 2, length-delimited.


def encode_example(int_features: Optional[Mapping[str, np.ndarray]] = None,
                   float_features: Optional[Mapping[str, np.ndarray]] = None
                   ) -> bytes:
  """Serialized tf.train.Example with int64 and float32 list features."""
  parts = []
  for name, values in (int_features or {}).items():
    parts.append(_feature_entry(name.encode("utf-8"), _INT64_LIST_TAG,
                                packed_varints(values)))
  for name, values in (float_features or {}).items():
    payload = np.asarray(values, dtype="<f4").tobytes()
    parts.append(_feature_entry(name.encode("utf-8"), _FLOAT_LIST_TAG, payload))
  features = b"".join(parts)
  return b"\x0a" + _len_prefix(len(features)) + features


def packed_varint_rows(matrix: np.ndarray) -> List[bytes]:
  """Packed varint bytes of every row of a non-negative int matrix (vectorised)."""
  matrix = np.asarray(matrix, dtype=np.int64)
  n, width = matrix.shape
  if n == 0:
    return []
  if width == 0:
    return [b""] * n
  if matrix.min() < 0 or matrix.max() >= (1 << 35):
    return [packed_varints(row) for row in matrix]
  if matrix.max() < 128:
    data = matrix.astype(np.uint8).tobytes()
    return [data[i * width:(i + 1) * width] for i in range(n)]
  num_bytes = (1 + (matrix >= (1 << 7)) + (matrix >= (1 << 14)) +
               (matrix >= (1 << 21)) + (matrix >= (1 << 28)))
  shifts = np.arange(5, dtype=np.int64) * 7
  groups = (matrix[..., None] >> shifts) & 0x7F
  position = np.arange(5)
  groups |= (position < num_bytes[..., None] - 1).astype(np.int64) << 7
  flat = groups[position < num_bytes[..., None]].astype(np.uint8).tobytes()
  ends = np.cumsum(num_bytes.sum(axis=1)).tolist()
  starts = [0] + ends[:-1]
  return [flat[s:e] for s, e in zip(starts, ends)]


class FixedShapeEncoder:
  """Encodes many Examples of fixed-length int / float features at once.

  `encode(int_features, float_features)` takes [n, width] arrays per feature
  and returns n serialized Examples, identical to `encode_example` row by row.
  """

  def __init__(self, int_names: Sequence[str], float_names: Sequence[str] = ()):
    self.int_names = list(int_names)
    self.float_names = list(float_names)

  def encode(self, int_features: Mapping[str, np.ndarray],
             float_features: Optional[Mapping[str, np.ndarray]] = None
             ) -> List[bytes]:
    float_features = float_features or {}
    columns = []
    for name in self.int_names:
      payloads = packed_varint_rows(int_features[name])
      columns.append(self._entries(name, _INT64_LIST_TAG, payloads))
    for name in self.float_names:
      values = np.ascontiguousarray(float_features[name], dtype="<f4")
      n, width = values.shape
      data = values.tobytes()
      step = 4 * width
      payloads = [data[i * step:(i + 1) * step] for i in range(n)]
      columns.append(self._entries(name, _FLOAT_LIST_TAG, payloads))
    out = []
    for parts in zip(*columns):
      features = b"".join(parts)
      out.append(b"\x0a" + _len_prefix(len(features)) + features)
    return out

  @staticmethod
  def _entries(name: str, tag: bytes, payloads: List[bytes]) -> List[bytes]:
    key = name.encode("utf-8")
    cache: Dict[int, tuple] = {}
    out = []
    for payload in payloads:
      n = len(payload)
      frame = cache.get(n)
      if frame is None:
        list_message_len = 1 + len(_len_prefix(n)) + n
        feature_prefix = tag + _len_prefix(list_message_len) + b"\x0a" + _len_prefix(n)
        feature_len = len(feature_prefix) + n
        entry_prefix = (b"\x0a" + _len_prefix(len(key)) + key + b"\x12" +
                        _len_prefix(feature_len))
        entry_len = len(entry_prefix) + feature_len
        frame = (b"\x0a" + _len_prefix(entry_len) + entry_prefix + feature_prefix)
        cache[n] = frame
      out.append(frame + payload)
    return out
