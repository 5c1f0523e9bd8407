"""`tf.train.Example` protos of int64 and float32 list features, encoded without TensorFlow.

Writes the protobuf wire bytes directly (packed varints through numpy, many
records at once), so record workers need neither TensorFlow nor a protobuf
object per record.

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

_INT64_LIST_TAG = b"\x1a"  # Feature.int64_list = 3, length-delimited.
_FLOAT_LIST_TAG = b"\x12"  # Feature.float_list = 2, length-delimited.


def encode_varint(value: int) -> bytes:
  """Protobuf varint of a non-negative Python int."""
  out = bytearray()
  while value > 0x7F:
    out.append((value & 0x7F) | 0x80)
    value >>= 7
  out.append(value)
  return bytes(out)


# Varint bytes of 0, 1, ...: length prefixes, and the values of one row,
# which a join of table entries packs faster than numpy (grown on demand).
_VARINTS = [encode_varint(i) for i in range(1 << 14)]
_TABLE_LIMIT = 1 << 18  # Ids of a 250k vocabulary.


def _len_prefix(n: int) -> bytes:
  return _VARINTS[n] if n < len(_VARINTS) else encode_varint(n)


def packed_varint_rows(matrix) -> List[bytes]:
  """Packed varint bytes of every row of an int64 matrix (vectorised;
  negatives as protobuf writes them: 10-byte two's complement)."""
  matrix = np.asarray(matrix, dtype=np.int64)
  n, width = matrix.shape
  if matrix.size == 0:
    return [b""] * n
  low, high = int(matrix.min()), int(matrix.max())
  if low >= 0 and high < 128:  # One byte each: masks, type ids.
    data = matrix.astype(np.uint8).tobytes()
    return [data[i * width:(i + 1) * width] for i in range(n)]
  if n == 1 and low >= 0 and high < _TABLE_LIMIT:
    _VARINTS.extend(encode_varint(i) for i in range(len(_VARINTS), high + 1))
    return [b"".join([_VARINTS[v] for v in matrix[0].tolist()])]
  unsigned = matrix.astype(np.uint64)
  # 7-bit groups of the widest value; each value keeps its non-zero ones.
  num_groups = max(1, -(-int(unsigned.max()).bit_length() // 7))
  shifts = np.arange(num_groups, dtype=np.uint64) * np.uint64(7)
  groups = (unsigned[..., None] >> shifts) & np.uint64(0x7F)
  num_bytes = np.ones(matrix.shape, np.int64)
  for shift in shifts[1:]:
    num_bytes += unsigned >= (np.uint64(1) << shift)
  position = np.arange(num_groups)
  groups |= (position < num_bytes[..., None] - 1).astype(np.uint64) << np.uint64(7)
  flat = groups[position < num_bytes[..., None]].astype(np.uint8).tobytes()
  ends = np.cumsum(num_bytes.sum(axis=1)).tolist()
  return [flat[s:e] for s, e in zip([0] + ends[:-1], ends)]


class FixedShapeEncoder:
  """Encodes many Examples of fixed-length int / float features at once.

  `encode(int_features, float_features)` takes [n, width] arrays per feature
  and returns the n serialized Examples, features in the names' order.
  """

  def __init__(self, int_names: Sequence[str], float_names: Sequence[str] = ()):
    self.int_names = list(int_names)
    self.float_names = list(float_names)

  def encode(self, int_features: Mapping[str, np.ndarray],
             float_features: Optional[Mapping[str, np.ndarray]] = None
             ) -> List[bytes]:
    columns = [self._entries(name, _INT64_LIST_TAG,
                             packed_varint_rows(int_features[name]))
               for name in self.int_names]
    for name in self.float_names:
      values = np.ascontiguousarray(float_features[name], dtype="<f4")
      n, width = values.shape
      data, step = values.tobytes(), 4 * width
      columns.append(self._entries(
          name, _FLOAT_LIST_TAG, [data[i * step:(i + 1) * step]
                                  for i in range(n)]))
    out = []
    for parts in zip(*columns):
      features = b"".join(parts)
      out.append(b"\x0a" + _len_prefix(len(features)) + features)
    return out

  @staticmethod
  def _entries(name: str, tag: bytes, payloads: List[bytes]) -> List[bytes]:
    """`Features.feature` map entries (name -> list of payload), one per
    payload; the framing before a payload depends on its length alone."""
    key = name.encode("utf-8")
    frames: Dict[int, bytes] = {}
    out = []
    for payload in payloads:
      n = len(payload)
      if n not in frames:
        list_prefix = b"\x0a" + _len_prefix(n)
        feature = tag + _len_prefix(len(list_prefix) + n) + list_prefix
        entry = (b"\x0a" + _len_prefix(len(key)) + key + b"\x12" +
                 _len_prefix(len(feature) + n) + feature)
        frames[n] = b"\x0a" + _len_prefix(len(entry) + n) + entry
      out.append(frames[n] + payload)
    return out


def encode_example(int_features: Optional[Mapping[str, np.ndarray]] = None,
                   float_features: Optional[Mapping[str, np.ndarray]] = None
                   ) -> bytes:
  """One serialized tf.train.Example of int64 and float32 list features."""
  int_features, float_features = int_features or {}, float_features or {}
  encoder = FixedShapeEncoder(list(int_features), list(float_features))
  return encoder.encode(
      {name: np.asarray([values], np.int64)
       for name, values in int_features.items()},
      {name: np.asarray([values], np.float32)
       for name, values in float_features.items()})[0]
