"""XTREME examples -> fine-tuning records; `RECORD_TYPES`: what differs per task type on the data side.

A record type reads a split (a task file, or `xtreme_tfds` rows) into
`SplitData`, makes its records and the side rows that map predictions back,
and gives its gold labels and record spec (`feature_spec`; the features are
listed in docs/finetuning.md). Builds on Model Garden's `classifier_data_lib`
truncation rule (pairs) and `squad_lib_sp`'s "max context" rule (QA
windows); its QA feature converter is not used: it strips accents before
SentencePiece, which breaks Hindi or Arabic text, so SentencePiece's own
byte offsets map pieces to characters.

Example:
```python
from rembert_tf.data import xtreme_records
sorted(xtreme_records.feature_spec("tagging", 128))
# ['feature_index', 'input_mask', 'input_type_ids', 'input_word_ids', 'label_ids']
```
"""
import bisect
import collections
import dataclasses
import functools
import json
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from absl import logging
import numpy as np
from official.nlp.data import classifier_data_lib
from official.nlp.data import squad_lib_sp
import tensorflow as tf

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.data import example_encoding
from rembert_tf.data import tokenizer as tokenizer_lib
from rembert_tf.data import xtreme_readers
from rembert_tf.evaluation import xtreme_tasks

IGNORED_LABEL_ID = -1
MODEL_INPUT_KEYS = ("input_word_ids", "input_mask", "input_type_ids")
Tokenizer = tokenizer_lib.SentencePieceTokenizer


def _pad(values: List[int], length: int, value: int) -> np.ndarray:
  out = np.full([length], value, dtype=np.int64)
  out[:len(values)] = values
  return out


def _encode_record(word_ids, type_ids, seq_length, feature_index, labels,
                   pad_id: int) -> bytes:
  int_features = {
      "input_word_ids": _pad(word_ids, seq_length, pad_id),
      "input_mask": _pad([1] * len(word_ids), seq_length, 0),
      "input_type_ids": _pad(type_ids, seq_length, 0),
      "feature_index": np.array([feature_index], dtype=np.int64),
  }
  int_features.update(labels)
  return example_encoding.encode_example(int_features=int_features)


def classification_records(examples, dataset: xtreme_tasks.XtremeTask,
                           tokenizer: Tokenizer, seq_length: int, options):
  """One record per sentence pair (label id 0 when unlabelled)."""
  del options
  special, label_ids = tokenizer.special, {l: i for i, l in enumerate(
      dataset.labels)}
  for index, ex in enumerate(examples):
    a, b = tokenizer.encode(ex.text_a), tokenizer.encode(ex.text_b)
    classifier_data_lib._truncate_seq_pair(a, b, seq_length - 3)  # pylint: disable=protected-access
    word_ids = [special.cls_id] + a + [special.sep_id] + b + [special.sep_id]
    type_ids = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    label = label_ids[ex.label] if ex.label is not None else 0
    yield _encode_record(word_ids, type_ids, seq_length, index,
                         {"label_id": np.array([label], np.int64)},
                         special.pad_id), None


def tagging_records(sentences, dataset: xtreme_tasks.XtremeTask,
                    tokenizer: Tokenizer, seq_length: int, options):
  """One record per chunk of words that fits; side rows locate the words."""
  del options
  special, label_ids = tokenizer.special, {l: i for i, l in enumerate(
      dataset.labels)}
  max_pieces = seq_length - 2
  index = 0
  for sentence_index, (words, tags) in enumerate(sentences):
    word_pieces = [(tokenizer.encode(word) or [special.unk_id])[:max_pieces]
                   for word in words]
    start = 0
    while start < len(words):
      end, used = start, 0
      while end < len(words) and used + len(word_pieces[end]) <= max_pieces:
        used += len(word_pieces[end])
        end += 1
      word_ids, labels, positions = [special.cls_id], [IGNORED_LABEL_ID], []
      for w in range(start, end):
        positions.append(len(word_ids))
        word_ids.extend(word_pieces[w])
        first_label = label_ids[tags[w]] if tags is not None else 0
        labels.extend([first_label] + [IGNORED_LABEL_ID] *
                      (len(word_pieces[w]) - 1))
      word_ids.append(special.sep_id)
      labels.append(IGNORED_LABEL_ID)
      if tags is None:  # unlabelled (test): nothing to learn from
        labels = [IGNORED_LABEL_ID] * len(labels)
      side = {"sentence": sentence_index, "word_start": start,
              "positions": positions}
      yield _encode_record(
          word_ids, [0] * len(word_ids), seq_length, index,
          {"label_ids": _pad(labels, seq_length, IGNORED_LABEL_ID)},
          special.pad_id), side
      index += 1
      start = end


def _encode_proto(sp, text: str):
  """SentencePieceText proto (pieces with byte offsets), any 0.2.x API."""
  try:
    return sp.encode(text, return_type="proto")
  except (TypeError, ValueError):
    return sp.encode(text, out_type="immutable_proto")


# Consecutive questions usually share their context: the last one is kept.
@functools.lru_cache(maxsize=1)
def _pieces_with_char_offsets(sp, text: str
                              ) -> Tuple[List[int], List[int], List[int]]:
  """Piece ids with the first and last character of each piece in `text`."""
  byte_starts = []  # byte offset -> character index
  offset = 0
  for ch in text:
    byte_starts.append(offset)
    offset += len(ch.encode("utf-8"))
  ids, starts, ends = [], [], []
  for piece in _encode_proto(sp, text).pieces:
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


def _window_record(special, query: List[int], doc_ids: List[int],
                   span: _DocSpan, answer_pieces: Optional[Tuple[int, int]],
                   seq_length: int, index: int) -> bytes:
  """`[CLS] query [SEP] window [SEP]` with the answer's positions (0: [CLS])."""
  doc_offset = len(query) + 2
  word_ids = ([special.cls_id] + query + [special.sep_id] +
              doc_ids[span.start:span.start + span.length] + [special.sep_id])
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
       "end_position": np.array([end_position], np.int64)}, special.pad_id)


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


def span_records(examples, dataset, tokenizer: Tokenizer, seq_length: int,
                 options):
  """Windows over each context; side rows (eval) hold what postprocessing needs."""
  del dataset
  is_training = options["is_training"]
  index = skipped = 0
  for example_index, ex in enumerate(examples):
    query = tokenizer.encode(ex.question_text)[:options["max_query_length"]]
    doc_ids, tok_starts, tok_ends = _pieces_with_char_offsets(
        tokenizer.sp, ex.paragraph_text)
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
    spans = _doc_spans(len(doc_ids), max_doc, options["doc_stride"])
    for span_index, span in enumerate(spans):
      side = None if is_training else _window_side_row(
          example_index, len(query) + 2, tok_starts, tok_ends, spans,
          span_index)
      yield _window_record(tokenizer.special, query, doc_ids, span,
                           answer_pieces, seq_length, index), side
      index += 1
  if skipped:
    logging.warning("%d training questions skipped: answer not mappable to "
                    "pieces.", skipped)


# --- Side files: what writing predictions back needs beyond the records -------


def _write_jsonl(path, rows) -> None:
  fileio.write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n"
                                  for row in rows))


def _write_side_rows(directory, name: str, side_rows, examples) -> None:
  """`<name>.side.jsonl`: one row per record."""
  del examples
  _write_jsonl(fileio.join(directory, f"{name}.side.jsonl"), side_rows)


def _write_qa_sides(directory, name: str, side_rows, examples) -> None:
  """The side rows, and each question's id and context (`.examples.jsonl`)."""
  _write_side_rows(directory, name, side_rows, examples)
  _write_jsonl(fileio.join(directory, f"{name}.examples.jsonl"), (
      {"qas_id": ex.qas_id, "context": ex.paragraph_text} for ex in examples))


def read_side_file(records_dir, name: str, suffix: str = "side") -> List[Dict]:
  """The rows of `<name>.<suffix>.jsonl` (side rows, or QA examples)."""
  path = fileio.join(records_dir, f"{name}.{suffix}.jsonl")
  return [json.loads(line) for line in fileio.read_text(path).splitlines()
          if line.strip()]


# --- What differs per task type: one entry per type --------------------------


@dataclasses.dataclass(frozen=True)
class SplitData:
  """One task split read for record creation."""
  examples: List[Any]
  has_labels: bool
  info: Dict[str, Any]           # extra metadata of the split (num_words, ...)
  # QA: the split as SQuAD v1.1 JSON, the scorer's gold file.
  squad_json: Optional[bytes] = None


@dataclasses.dataclass(frozen=True)
class RecordType:
  """How the examples of one task type are read and become records."""
  name: str
  default_seq_length: int
  # Label feature -> its length (None: seq_length).
  label_lengths: Dict[str, Optional[int]]
  # (path, dataset, is_training): a task file; (rows, dataset, is_training,
  # origin): the rows `xtreme_tfds` reads.
  read: Callable[[str, Any, bool], SplitData]
  from_rows: Callable[[List[Dict], Any, bool, str], SplitData]
  # (examples, dataset, tokenizer, seq_length, options) -> (record, side row).
  records: Callable[..., Iterable[Tuple[bytes, Optional[Dict]]]]
  # (split name, data) -> (gold file name, its bytes).
  gold: Callable[[str, SplitData], Tuple[str, bytes]]
  # Writes an eval split's side files: (directory, name, side rows, examples).
  write_sides: Optional[Callable[..., None]]


def _labelled_split(examples, labels, is_training, origin, needs,
                    info=None) -> SplitData:
  """`labels`: each example's label (None: unlabelled); training needs them."""
  has_labels = bool(examples) and all(l is not None for l in labels)
  if is_training and not has_labels:
    raise xtreme_tasks.TaskDataError(f"{origin}: training {needs}.")
  return SplitData(examples, has_labels, info or {})


def _pairs_split(examples, is_training, origin) -> SplitData:
  return _labelled_split(
      examples, [ex.label for ex in examples], is_training, origin,
      "rows need a label column (sentence1<TAB>sentence2<TAB>label)")


def _pairs_from_rows(rows, dataset, is_training, origin) -> SplitData:
  return _pairs_split(xtreme_readers.sentence_pair_examples(
      [(r["where"], r["text_a"].strip(), r["text_b"].strip(), r.get("label"))
       for r in rows], dataset, origin), is_training, origin)


def _tagged_split(sentences, is_training, origin) -> SplitData:
  return _labelled_split(
      sentences, [tags for _, tags in sentences], is_training, origin,
      "lines need token<TAB>tag",
      {"num_words": [len(words) for words, _ in sentences]})


def _tagged_from_rows(rows, dataset, is_training, origin) -> SplitData:
  """Rows of words and tags; sentences without words are left out."""
  sentences = [([w.strip() for w in r["words"]],
                xtreme_readers.check_tags(list(r["tags"]), r["where"], dataset)
                if r.get("tags") is not None else None)
               for r in rows if r["words"]]
  return _tagged_split(sentences, is_training, origin)


def _lines(rows) -> bytes:
  return "".join(row + "\n" for row in rows).encode("utf-8")


def _squad_split(data: Dict, origin, is_training,
                 squad_json: Optional[bytes] = None) -> SplitData:
  """`squad_json`: the file's own bytes (else `data` written as JSON)."""
  return SplitData(
      xtreme_readers.squad_examples(data, origin, is_training),
      is_training or xtreme_readers.has_answers(data), {},
      squad_json=squad_json or json.dumps(
          data, ensure_ascii=False).encode("utf-8"))


def _squad_from_rows(rows, dataset, is_training, origin) -> SplitData:
  """Rows of one question each -> SQuAD v1.1 JSON (a paragraph per row)."""
  del dataset
  return _squad_split({"version": "1.1", "data": [{"title": "", "paragraphs": [{
      "context": r["context"],
      "qas": [{"id": str(r["id"]), "question": r["question"], "answers": [
          {"text": text, "answer_start": int(start)} for text, start in
          zip(r["answers"]["text"], r["answers"]["answer_start"])]}]}]}
                                                      for r in rows]},
                      origin, is_training)


RECORD_TYPES = {t.name: t for t in (
    RecordType(
        name="classification", default_seq_length=128,
        label_lengths={"label_id": 1},
        read=lambda path, dataset, is_training: _pairs_split(
            xtreme_readers.read_sentence_pairs(path, dataset), is_training,
            path),
        from_rows=_pairs_from_rows, records=classification_records,
        gold=lambda name, data: (f"{name}.tsv", _lines(
            ex.label for ex in data.examples)),
        write_sides=None),
    RecordType(
        name="tagging", default_seq_length=128,
        label_lengths={"label_ids": None},
        read=lambda path, dataset, is_training: _tagged_split(
            xtreme_readers.read_tagged_sentences(path, dataset), is_training,
            path),
        from_rows=_tagged_from_rows, records=tagging_records,
        gold=lambda name, data: (f"{name}.tsv", _lines(
            "".join(t + "\n" for t in tags) for _, tags in data.examples)),
        write_sides=_write_side_rows),
    RecordType(
        name="span", default_seq_length=384,
        label_lengths={"start_position": 1, "end_position": 1},
        read=lambda path, dataset, is_training: _squad_split(
            xtreme_readers.read_squad_json(path, dataset), path, is_training,
            fileio.read_bytes(path)),
        from_rows=_squad_from_rows, records=span_records,
        gold=lambda name, data: (f"{name}.json", data.squad_json),
        write_sides=_write_qa_sides),
)}


def record_type(name: str) -> RecordType:
  if name not in RECORD_TYPES:
    raise errors.InputError(
        f"Unknown fine-tuning task type {name!r} (in the records' "
        f"metadata.json field task_type); known: {', '.join(RECORD_TYPES)}. "
        "Recreate the records with rembert-create-finetuning-data.")
  return RECORD_TYPES[name]


def feature_spec(task_type: str, seq_length: int) -> Dict:
  """The record spec of a task type: model inputs, feature_index, labels."""
  lengths = dict.fromkeys(MODEL_INPUT_KEYS, seq_length)
  lengths.update(feature_index=1, **record_type(task_type).label_lengths)
  return {key: tf.io.FixedLenFeature([length or seq_length], tf.int64)
          for key, length in lengths.items()}
