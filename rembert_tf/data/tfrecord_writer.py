"""TFRecord files written without TensorFlow (CRC32C in numpy, over many records at once).

A record is `uint64 length | uint32 masked_crc32c(length) | data |
uint32 masked_crc32c(data)` (little-endian). The CRC runs over a batch of
records left-padded to one length (leading zeros leave a zero-initialised CRC
unchanged; the standard initial value is added back by linearity).

Example:
```python
from rembert_tf.data import tfrecord_writer
tfrecord_writer.write_tfrecord_file("x.tfrecord", [b"abc", b"defg"])
assert tfrecord_writer.crc32c(b"123456789") == 0xE3069283
```
"""
import itertools
import struct
from typing import Iterable, List, Sequence

import numpy as np

from rembert_tf.common import fileio

_POLY = 0x82F63B78  # CRC32C, reflected.
_MASK_DELTA = 0xA282EAD8
_BATCH = 8192
_LENGTH = struct.Struct("<Q")
_HEADER_CRC = struct.Struct("<I")


def _table_entry(c: int) -> int:
  for _ in range(8):
    c = (c >> 1) ^ _POLY if c & 1 else c >> 1
  return c


_TABLE_LIST = [_table_entry(i) for i in range(256)]
_TABLE = np.array(_TABLE_LIST, dtype=np.uint32)
# The register after n zero bytes from the initial ~0, for n = 0, 1, ...
_INIT_EFFECT: List[int] = [0xFFFFFFFF]


def crc32c(data: bytes) -> int:
  """CRC32C of one byte string (slow path, for checks)."""
  return int(crc32c_many([data])[0])


def crc32c_many(messages: Sequence[bytes]) -> np.ndarray:
  """CRC32C of each message, vectorised over the batch; uint32 array."""
  n = len(messages)
  if n == 0:
    return np.zeros(0, dtype=np.uint32)
  lengths = np.fromiter((len(m) for m in messages), dtype=np.int64, count=n)
  width = int(lengths.max())
  # Column i holds message i bottom-aligned (zero padding on top); byte
  # position j of every message is the contiguous row j.
  padded = b"".join(b"\0" * (width - len(m)) + m for m in messages)
  matrix = np.frombuffer(padded, dtype=np.uint8).reshape(n, width).T.copy()
  crc = np.zeros(n, dtype=np.uint32)
  index = np.empty(n, dtype=np.uint32)
  shift = np.uint32(8)
  for j in range(width):
    np.bitwise_xor(crc, matrix[j], out=index)
    np.bitwise_and(index, 0xFF, out=index)
    np.right_shift(crc, shift, out=crc)
    np.bitwise_xor(crc, _TABLE[index], out=crc)
  while len(_INIT_EFFECT) <= width:
    c = _INIT_EFFECT[-1]
    _INIT_EFFECT.append(_TABLE_LIST[c & 0xFF] ^ (c >> 8))
  effects = np.asarray(_INIT_EFFECT, dtype=np.uint32)[lengths]
  return crc ^ effects ^ np.uint32(0xFFFFFFFF)


def masked_crc(crc: np.ndarray) -> np.ndarray:
  crc = crc.astype(np.uint64)
  rotated = ((crc >> np.uint64(15)) | (crc << np.uint64(17))) & np.uint64(0xFFFFFFFF)
  return ((rotated + np.uint64(_MASK_DELTA)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def frame_each(records: Sequence[bytes]) -> List[bytes]:
  """Each record with its TFRecord framing (length, CRCs) around it."""
  if not records:
    return []
  lengths = np.array([len(r) for r in records], dtype="<u8")
  length_bytes = [l.tobytes() for l in lengths]
  length_crcs = masked_crc(crc32c_many(length_bytes)).astype("<u4").tolist()
  data_crcs = masked_crc(crc32c_many(records)).astype("<u4").tolist()
  pack = _HEADER_CRC.pack
  return [length_bytes[i] + pack(length_crcs[i]) + record + pack(data_crcs[i])
          for i, record in enumerate(records)]


def split_framed(data: bytes) -> List[bytes]:
  """Framed records (as written by frame_each) back into a list, framing kept."""
  out, offset = [], 0
  while offset < len(data):
    (length,) = _LENGTH.unpack_from(data, offset)
    end = offset + 16 + length
    if end > len(data):
      raise ValueError("truncated TFRecord data")
    out.append(data[offset:end])
    offset = end
  return out


def write_framed_file(path, framed: Iterable[bytes]) -> int:
  """Writes already framed records under a temporary name, renamed to `path`
  when complete (any filesystem); returns their count."""
  count = 0
  with fileio.atomic_write(fileio.as_str(path), "wb") as f:
    for chunk in framed:
      f.write(chunk)
      count += 1
  return count


def write_tfrecord_file(path, records: Iterable[bytes]) -> int:
  """Frames `records` in batches and writes them as `write_framed_file` does."""
  def framed():
    iterator = iter(records)
    while batch := list(itertools.islice(iterator, _BATCH)):
      yield from frame_each(batch)
  return write_framed_file(path, framed())
