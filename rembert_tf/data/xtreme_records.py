"""XTREME examples -> fine-tuning records, and what differs per task type on the data side.

`RECORD_TYPES` holds one entry per task type (sentence-pair classification,
per-word tagging, span QA): how a task file or TFDS rows are read into
examples, how examples become records and the side rows that map
predictions back, the gold labels, and the record spec (`feature_spec`).
Each builder yields `(serialized tf.train.Example, side row or None)`;
records have static int64 shapes: `input_word_ids`, `input_mask`,
`input_type_ids` [seq_length], `feature_index` [1]; plus `label_id` [1],
`label_ids` [seq_length] (tagging, -1 = ignored) or `start_position`,
`end_position` [1] (span; 0 = [CLS]).

Builds on Model Garden's `classifier_data_lib` truncation rule (pairs) and
`squad_lib_sp`'s "max context" rule (QA windows). Its QA feature converter
is not used: it strips accents before SentencePiece, which breaks Hindi or
Arabic text; SentencePiece's own byte offsets map pieces to characters.

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
  # A task file, or TFDS rows (`xtreme_tfds`) with the origin they name.
  read: Callable[[str, Any, bool], SplitData]
  from_rows: Callable[[List[Dict], Any, bool, str], SplitData]
  records: Callable[..., Iterable[Tuple[bytes, Optional[Dict]]]]
  gold_text: Callable[[str, SplitData], Tuple[str, bytes]]
  writes_side_files: bool
  # Writes what prediction needs beyond the side rows (QA: the contexts).
  write_examples_side: Optional[Callable[[str, str, List[Any]], None]]
  default_seq_length: int
  label_features: Callable[[int], Dict[str, tf.io.FixedLenFeature]]


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


def _one_id(name):
  return lambda seq_length: {name: tf.io.FixedLenFeature([1], tf.int64)}


CLASSIFICATION = RecordType(
    name="classification",
    read=lambda path, dataset, is_training: _pairs_split(
        xtreme_readers.read_sentence_pairs(path, dataset, with_labels=True),
        is_training, path),
    from_rows=_pairs_from_rows,
    records=lambda data, dataset, tokenizer, seq_length, options:
    classification_records(data.examples, dataset, tokenizer, seq_length),
    gold_text=lambda name, data: (f"{name}.tsv", _lines(
        ex.label for ex in data.examples)),
    writes_side_files=False,
    write_examples_side=None,
    default_seq_length=128,
    label_features=_one_id("label_id"))

TAGGING = RecordType(
    name="tagging",
    read=lambda path, dataset, is_training: _tagged_split(
        xtreme_readers.read_tagged_sentences(path, dataset, with_labels=True),
        is_training, path),
    from_rows=_tagged_from_rows,
    records=lambda data, dataset, tokenizer, seq_length, options:
    tagging_records(data.examples, dataset, tokenizer, seq_length),
    gold_text=lambda name, data: (f"{name}.tsv", _lines(
        "".join(t + "\n" for t in tags) for _, tags in data.examples)),
    writes_side_files=True,
    write_examples_side=None,
    default_seq_length=128,
    label_features=lambda seq_length: {
        "label_ids": tf.io.FixedLenFeature([seq_length], tf.int64)})

SPAN = RecordType(
    name="span",
    read=lambda path, dataset, is_training: _squad_split(
        xtreme_readers.read_squad_json(path, dataset), path, is_training,
        fileio.read_bytes(path)),
    from_rows=_squad_from_rows,
    records=lambda data, dataset, tokenizer, seq_length, options:
    span_records(data.examples, tokenizer, seq_length, options["doc_stride"],
                 options["max_query_length"], options["is_training"]),
    gold_text=lambda name, data: (f"{name}.json", data.squad_json),
    writes_side_files=True,
    write_examples_side=write_examples_side,
    default_seq_length=384,
    label_features=lambda seq_length: {**_one_id("start_position")(1),
                                       **_one_id("end_position")(1)})

RECORD_TYPES = {t.name: t for t in (CLASSIFICATION, TAGGING, SPAN)}
MODEL_INPUT_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


def record_type(name: str) -> RecordType:
  if name not in RECORD_TYPES:
    raise errors.InputError(
        f"Unknown fine-tuning task type {name!r} (in the records' "
        f"metadata.json field task_type); known: {', '.join(RECORD_TYPES)}. "
        "Recreate the records with rembert-create-finetuning-data.")
  return RECORD_TYPES[name]


def feature_spec(task_type: str, seq_length: int) -> Dict:
  """The record spec of a task type: model inputs, feature_index, labels."""
  spec = {key: tf.io.FixedLenFeature([seq_length], tf.int64)
          for key in MODEL_INPUT_KEYS}
  spec["feature_index"] = tf.io.FixedLenFeature([1], tf.int64)
  spec.update(record_type(task_type).label_features(seq_length))
  return spec
