"""XTREME examples -> fine-tuning records, with the side rows that map back.

Each builder yields `(serialized tf.train.Example, side row or None)`;
records have static int64 shapes: `input_word_ids`, `input_mask`,
`input_type_ids` [seq_length], `feature_index` [1]; plus `label_id` [1],
`label_ids` [seq_length] (tagging, -1 = ignored) or `start_position`,
`end_position` [1] (span; 0 = [CLS]).

Builds on Model Garden's `classifier_data_lib` truncation rule (pairs) and
`squad_lib_sp`'s "max context" rule (QA windows). Its QA feature converter
is not used: it strips accents before SentencePiece, which breaks Hindi or
Arabic text; SentencePiece's own byte offsets map pieces to characters.
"""
import bisect
import collections
import json
from typing import Dict, List, Optional, Tuple

from absl import logging
import numpy as np
from official.nlp.data import classifier_data_lib
from official.nlp.data import squad_lib_sp

from rembert_tf.common import fileio
from rembert_tf.data import example_encoding
from rembert_tf.data import tokenizer as tokenizer_lib
from rembert_tf.evaluation import xtreme_tasks

IGNORED_LABEL_ID = -1


class SentencePieceTokenizer:
  """Text -> SentencePiece piece ids, with the model's special ids (by piece name)."""

  def __init__(self, sp_model_path):
    self.sp = tokenizer_lib.load_sentencepiece(sp_model_path)
    special = tokenizer_lib.SpecialTokens.from_processor(
        self.sp, source=fileio.as_str(sp_model_path))
    self.cls_id = special.cls_id
    self.sep_id = special.sep_id
    self.pad_id = special.pad_id
    self.unk_id = special.unk_id

  def encode(self, text: str) -> List[int]:
    return list(self.sp.encode(text))

  def _encode_proto(self, text: str):
    """SentencePieceText proto (pieces with byte offsets), any 0.2.x API."""
    try:
      return self.sp.encode(text, return_type="proto")
    except (TypeError, ValueError):
      return self.sp.encode(text, out_type="immutable_proto")

  def encode_with_char_offsets(self, text: str
                               ) -> Tuple[List[int], List[int], List[int]]:
    """Piece ids with the first and last character of each piece in `text`."""
    # Consecutive questions usually share their context: keep the last one.
    if getattr(self, "_last_context", (None,))[0] == text:
      return self._last_context[1]
    result = self._encode_with_char_offsets(text)
    self._last_context = (text, result)
    return result

  def _encode_with_char_offsets(self, text: str):
    proto = self._encode_proto(text)
    # byte offset -> character index
    byte_starts = []
    offset = 0
    for ch in text:
      byte_starts.append(offset)
      offset += len(ch.encode("utf-8"))
    ids, starts, ends = [], [], []
    for piece in proto.pieces:
      first = bisect.bisect_right(byte_starts, piece.begin) - 1
      if piece.end > piece.begin:
        last = bisect.bisect_right(byte_starts, piece.end - 1) - 1
      else:
        last = first
      first = max(first, 0)
      while first < last and text[first].isspace():  # "▁" covers the space
        first += 1
      ids.append(piece.id)
      starts.append(first)
      ends.append(max(last, first))
    return ids, starts, ends


def _pad(values: List[int], length: int, value: int) -> np.ndarray:
  out = np.full([length], value, dtype=np.int64)
  out[:len(values)] = values
  return out


def _encode_record(word_ids, type_ids, seq_length, feature_index, extra,
                   pad_id: int):
  int_features = {
      "input_word_ids": _pad(word_ids, seq_length, pad_id),
      "input_mask": _pad([1] * len(word_ids), seq_length, 0),
      "input_type_ids": _pad(type_ids, seq_length, 0),
      "feature_index": np.array([feature_index], dtype=np.int64),
  }
  int_features.update(extra)
  return example_encoding.encode_example(int_features=int_features)


def classification_records(examples, dataset: xtreme_tasks.XtremeTask,
                           tokenizer: SentencePieceTokenizer, seq_length: int):
  """One record per sentence pair (label id 0 when unlabelled)."""
  label_ids = {l: i for i, l in enumerate(dataset.labels)}
  for index, ex in enumerate(examples):
    a, b = tokenizer.encode(ex.text_a), tokenizer.encode(ex.text_b)
    classifier_data_lib._truncate_seq_pair(a, b, seq_length - 3)  # pylint: disable=protected-access
    word_ids = ([tokenizer.cls_id] + a + [tokenizer.sep_id] + b +
                [tokenizer.sep_id])
    type_ids = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    label = label_ids[ex.label] if ex.label is not None else 0
    yield _encode_record(word_ids, type_ids, seq_length, index,
                         {"label_id": np.array([label], np.int64)},
                         tokenizer.pad_id), None


def tagging_records(sentences, dataset: xtreme_tasks.XtremeTask,
                    tokenizer: SentencePieceTokenizer, seq_length: int):
  """One record per chunk of words that fits; side rows locate the words."""
  label_ids = {l: i for i, l in enumerate(dataset.labels)}
  max_pieces = seq_length - 2
  index = 0
  for sentence_index, (words, tags) in enumerate(sentences):
    word_pieces = []
    for word in words:
      pieces = tokenizer.encode(word) or [tokenizer.unk_id]
      word_pieces.append(pieces[:max_pieces])
    start = 0
    while start < len(words):
      end, used = start, 0
      while end < len(words) and used + len(word_pieces[end]) <= max_pieces:
        used += len(word_pieces[end])
        end += 1
      word_ids, labels, positions = [tokenizer.cls_id], [IGNORED_LABEL_ID], []
      for w in range(start, end):
        positions.append(len(word_ids))
        word_ids.extend(word_pieces[w])
        first_label = label_ids[tags[w]] if tags is not None else 0
        labels.extend([first_label] + [IGNORED_LABEL_ID] *
                      (len(word_pieces[w]) - 1))
      word_ids.append(tokenizer.sep_id)
      labels.append(IGNORED_LABEL_ID)
      if tags is None:  # unlabelled (test): nothing to learn from
        labels = [IGNORED_LABEL_ID] * len(labels)
      side = {"sentence": sentence_index, "word_start": start,
              "positions": positions}
      yield _encode_record(
          word_ids, [0] * len(word_ids), seq_length, index,
          {"label_ids": _pad(labels, seq_length, IGNORED_LABEL_ID)},
          tokenizer.pad_id), side
      index += 1
      start = end


_DocSpan = collections.namedtuple("DocSpan", ["start", "length"])


def _doc_spans(num_pieces: int, max_length: int, stride: int) -> List[_DocSpan]:
  """Windows of at most `max_length` pieces, starting every `stride` pieces."""
  spans, offset = [], 0
  while offset < num_pieces:
    length = min(num_pieces - offset, max_length)
    spans.append(_DocSpan(offset, length))
    if offset + length == num_pieces:
      break
    offset += min(length, stride)
  return spans


def _answer_pieces(example, tok_starts: List[int], tok_ends: List[int]
                   ) -> Optional[Tuple[int, int]]:
  """First and last piece of a training answer (None: no piece covers it)."""
  char_start = example.start_position
  char_end = char_start + len(example.orig_answer_text) - 1
  covering = [i for i in range(len(tok_starts))
              if tok_ends[i] >= char_start and tok_starts[i] <= char_end]
  return (covering[0], covering[-1]) if covering else None


def _window_record(tokenizer: SentencePieceTokenizer, query: List[int],
                   doc_ids: List[int], span: _DocSpan,
                   answer_pieces: Optional[Tuple[int, int]], seq_length: int,
                   index: int) -> bytes:
  """`[CLS] query [SEP] window [SEP]` with the answer's positions (0: [CLS])."""
  doc_offset = len(query) + 2
  word_ids = ([tokenizer.cls_id] + query + [tokenizer.sep_id] +
              doc_ids[span.start:span.start + span.length] +
              [tokenizer.sep_id])
  type_ids = [0] * doc_offset + [1] * (span.length + 1)
  start_position = end_position = 0
  if answer_pieces is not None:
    first, last = answer_pieces
    if first >= span.start and last < span.start + span.length:
      start_position = first - span.start + doc_offset
      end_position = last - span.start + doc_offset
  return _encode_record(
      word_ids, type_ids, seq_length, index,
      {"start_position": np.array([start_position], np.int64),
       "end_position": np.array([end_position], np.int64)}, tokenizer.pad_id)


def _window_side_row(example_index: int, doc_offset: int,
                     tok_starts: List[int], tok_ends: List[int],
                     spans: List[_DocSpan], span_index: int) -> Dict:
  """What `squad_lib_sp.postprocess_output` needs about one window."""
  span = spans[span_index]
  window = slice(span.start, span.start + span.length)
  return {
      "example_index": example_index, "doc_offset": doc_offset,
      "tok_start_to_orig_index": tok_starts[window],
      "tok_end_to_orig_index": tok_ends[window],
      "token_is_max_context": [
          bool(squad_lib_sp._check_is_max_context(spans, span_index,  # pylint: disable=protected-access
                                                   span.start + i))
          for i in range(span.length)],
  }


def span_records(examples, tokenizer: SentencePieceTokenizer, seq_length: int,
                 doc_stride: int, max_query_length: int, is_training: bool):
  """Windows over each context; side rows (eval) hold what postprocessing needs."""
  index = skipped = 0
  for example_index, ex in enumerate(examples):
    query = tokenizer.encode(ex.question_text)[:max_query_length]
    doc_ids, tok_starts, tok_ends = (
        list(x) for x in tokenizer.encode_with_char_offsets(ex.paragraph_text))
    answer_pieces = None
    if is_training:
      answer_pieces = _answer_pieces(ex, tok_starts, tok_ends)
      if answer_pieces is None:
        skipped += 1
        continue
    max_doc = seq_length - len(query) - 3
    if max_doc <= 0:
      raise xtreme_tasks.TaskDataError(
          f"seq_length {seq_length} leaves no room for the context after a "
          f"{len(query)}-piece question; raise --seq_length or lower "
          "--max_query_length.")
    spans = _doc_spans(len(doc_ids), max_doc, doc_stride)
    for span_index, span in enumerate(spans):
      side = None if is_training else _window_side_row(
          example_index, len(query) + 2, tok_starts, tok_ends, spans,
          span_index)
      yield _window_record(tokenizer, query, doc_ids, span, answer_pieces,
                           seq_length, index), side
      index += 1
  if skipped:
    logging.warning("%d training questions skipped: answer not mappable to "
                    "pieces.", skipped)


# --- Side files: what writing predictions back needs beyond the records -------


def write_examples_side(directory, name: str, examples) -> None:
  """QA: each question's id and context (`<name>.examples.jsonl`)."""
  fileio.write_text(fileio.join(directory, f"{name}.examples.jsonl"), "".join(
      json.dumps({"qas_id": ex.qas_id, "context": ex.paragraph_text},
                 ensure_ascii=False) + "\n" for ex in examples))


def read_side_file(records_dir, name: str, suffix: str = "side") -> List[Dict]:
  """The rows of `<name>.<suffix>.jsonl` (side rows, or QA examples)."""
  path = fileio.join(records_dir, f"{name}.{suffix}.jsonl")
  return [json.loads(line) for line in fileio.read_text(path).splitlines()
          if line.strip()]
