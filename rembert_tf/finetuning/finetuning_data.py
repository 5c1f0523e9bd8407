"""Turns the XTREME `download/` layout into fine-tuning TFRecords.

Builds on Model Garden's data code:
* `official.nlp.data.classifier_data_lib`: the XTREME XNLI / PAWS-X processors
  give the label sets and the TSV reader; their dev reader merges languages and
  their language lists are fixed, so the per-language reading (any language
  present, label checks with line numbers) is added here.
* `official.nlp.data.squad_lib_sp`: `SquadExample` / `InputFeatures`, the
  "max context" rule for overlapping windows and, at prediction time,
  `postprocess_output` (n-best spans -> answer text). Its feature converter is
  not used: it strips accents and combining marks before SentencePiece, which
  breaks Vietnamese, Hindi or Arabic text; here SentencePiece's own byte offsets
  map pieces to characters of the untouched context.
* PAN-X is read word by word as XTREME writes it (`token<TAB>tag`, blank line
  between sentences): the first piece of each word carries the tag, the others
  get label id -1 (ignored in loss and metrics); sentences longer than the
  sequence are split into several records, never cut.

Output, for `--output_dir O` and task T (written atomically):
```
O/T/metadata.json                   task, task_type, seq_length, labels, splits
O/T/train-en.tfrecord               English training records
O/T/<split>-<lang>.tfrecord         dev / test records of each language
O/T/<split>-<lang>.side.jsonl       raw ids to write predictions back (panx, QA)
O/T/labels/T/<split>-<lang>.tsv|json   gold labels in the benchmark layout
```
Record features (int64, static length `seq_length`): `input_word_ids`,
`input_mask`, `input_type_ids`, `feature_index` [1]; plus `label_id` [1]
(classification), `label_ids` [seq_length] (tagging, -1 = ignored), or
`start_position`, `end_position` [1] (span; 0 = the [CLS] target).

Example:
```python
from rembert_tf.finetuning import finetuning_data
meta = finetuning_data.create_finetuning_data(
    task="xnli", data_dir="download", sp_model="spm/sentencepiece.model",
    output_dir="records", seq_length=128)
```
"""
import bisect
import collections
import json
import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from absl import logging
import numpy as np
import tensorflow as tf
from official.nlp.data import classifier_data_lib
from official.nlp.data import squad_lib_sp

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.data import example_encoding
from rembert_tf.data import tokenizer as tokenizer_lib
from rembert_tf.finetuning import tasks

METADATA_FILE = "metadata.json"
IGNORED_LABEL_ID = -1
# [CLS] + at least a few pieces + [SEP] (+ [SEP]); below this no task fits.
MIN_SEQ_LENGTH = 8


class TaskDataError(errors.InputError):
  """A task file is missing or malformed, or a data option cannot work."""


# --- Reading -------------------------------------------------------------------


def _require_file(path, spec: tasks.TaskSpec):
  if not fileio.isfile(path):
    raise TaskDataError(
        f"Missing {spec.name} file {path}. Expected the XTREME download layout "
        f"under the data dir: {spec.layout()} (see rembert_tf/finetuning/"
        "tasks.py).")


def discover_languages(spec: tasks.TaskSpec, data_dir, split: str) -> List[str]:
  """Languages with a file for `split` under data_dir, benchmark order first."""
  if split not in spec.eval_files:
    return []
  pattern = spec.eval_files[split]
  if "{lang}" not in pattern:
    return ["en"] if fileio.isfile(spec.path(data_dir, split)) else []
  regex = re.compile(re.escape(pattern).replace(re.escape("{lang}"),
                                                r"([A-Za-z0-9_]+)") + "$")
  found = set()
  for path in fileio.glob(fileio.join(data_dir, pattern.replace("{lang}", "*"))):
    match = regex.search(path.replace("\\", "/"))
    if match and len(set(match.groups())) == 1:
      found.add(match.group(1))
  ordered = [l for l in spec.languages if l in found]
  return ordered + sorted(found - set(ordered))


def read_sentence_pairs(path, spec: tasks.TaskSpec,
                        with_labels: bool) -> List[classifier_data_lib.InputExample]:
  """`sentence1<TAB>sentence2[<TAB>label]` rows; labels checked against the task."""
  _require_file(path, spec)
  try:
    rows = classifier_data_lib.DataProcessor._read_tsv(fileio.as_str(path))  # pylint: disable=protected-access
  except UnicodeDecodeError as e:
    raise TaskDataError(f"{path} is not UTF-8 text ({e.reason} at byte "
                        f"{e.start}).") from None
  examples = []
  for line_number, row in enumerate(rows, start=1):
    if len(row) < 2:
      raise TaskDataError(f"{path}:{line_number}: expected sentence1<TAB>"
                          f"sentence2[<TAB>label], got {len(row)} field(s).")
    label = None
    if with_labels and len(row) >= 3:
      label = row[2].strip()
      if spec.name == "xnli" and label == "contradictory":
        label = "contradiction"
      if label not in spec.labels:
        raise TaskDataError(
            f"{path}:{line_number}: label {label!r} is not a {spec.name} "
            f"label ({', '.join(spec.labels)}).")
    examples.append(classifier_data_lib.InputExample(
        guid=f"{fileio.basename(path)}-{line_number - 1}", text_a=row[0], text_b=row[1],
        label=label, example_id=line_number - 1))
  return examples


def read_tagged_sentences(path, spec: tasks.TaskSpec,
                          with_labels: bool
                          ) -> List[Tuple[List[str], Optional[List[str]]]]:
  """`token<TAB>tag` lines (test: token only), blank line between sentences."""
  _require_file(path, spec)
  sentences = []
  words, tags = [], []
  has_tags = None
  for line_number, line in enumerate(_text_lines(path), start=1):
    line = line.rstrip("\r\n")
    if not line.strip():
      if words:
        sentences.append((words, tags if has_tags else None))
      words, tags = [], []
      continue
    fields = line.split("\t")
    words.append(fields[0].strip())
    if with_labels and len(fields) >= 2:
      has_tags = True
      tag = fields[-1].strip()
      if tag not in spec.labels:
        raise TaskDataError(
            f"{path}:{line_number}: tag {tag!r} is not a {spec.name} tag "
            f"({', '.join(spec.labels)}).")
      tags.append(tag)
    else:
      tags.append("O")
  if words:
    sentences.append((words, tags if has_tags else None))
  return sentences


def _text_lines(path) -> List[str]:
  try:
    return fileio.read_text(path).splitlines()
  except UnicodeDecodeError as e:
    raise TaskDataError(f"{path} is not UTF-8 text ({e.reason} at byte "
                        f"{e.start}).") from None


def _squad_paragraphs(path):
  """(context, qas) of each paragraph of a SQuAD v1.1 file, fields checked."""
  try:
    data = json.loads("\n".join(_text_lines(path)))
  except json.JSONDecodeError as e:
    raise TaskDataError(f"{path} is not valid JSON: {e}") from None
  if not isinstance(data, dict) or not isinstance(data.get("data"), list):
    raise TaskDataError(f"{path}: expected SQuAD v1.1 JSON with a 'data' list.")
  for a, article in enumerate(data["data"]):
    if not isinstance(article, dict) or "paragraphs" not in article:
      raise TaskDataError(f"{path}: data[{a}] has no field 'paragraphs' "
                          "(SQuAD v1.1: data[].paragraphs[].qas[]).")
    for p, paragraph in enumerate(article["paragraphs"]):
      if "context" not in paragraph or "qas" not in paragraph:
        raise TaskDataError(f"{path}: data[{a}].paragraphs[{p}] needs the "
                            "fields 'context' and 'qas' (SQuAD v1.1).")
      for q, qa in enumerate(paragraph["qas"]):
        if "id" not in qa or "question" not in qa:
          raise TaskDataError(f"{path}: data[{a}].paragraphs[{p}].qas[{q}] "
                              "needs the fields 'id' and 'question'.")
      yield paragraph["context"], paragraph["qas"]


def read_squad_examples(path, spec: tasks.TaskSpec,
                        is_training: bool) -> List[squad_lib_sp.SquadExample]:
  """SQuAD v1.1 JSON -> SquadExample list (start_position is a char offset)."""
  _require_file(path, spec)
  examples = []
  for context, qas in _squad_paragraphs(path):
    for qa in qas:
      answer_text, start = None, None
      if is_training:
        if not qa.get("answers"):
          raise TaskDataError(f"{path}: training question {qa['id']} has "
                              "no answer.")
        answer = qa["answers"][0]
        answer_text, start = answer["text"], int(answer["answer_start"])
        if context[start:start + len(answer_text)] != answer_text:
          found = context.find(answer_text)
          if found < 0:
            logging.warning("%s: answer of %s not in its context; skipped.",
                            path, qa["id"])
            continue
          start = found
      examples.append(squad_lib_sp.SquadExample(
          qas_id=str(qa["id"]), question_text=qa["question"],
          paragraph_text=context, orig_answer_text=answer_text,
          start_position=start))
  return examples


# --- Encoding --------------------------------------------------------------------


class Encoder:
  """SentencePiece encoding; special ids looked up by piece name in the model."""

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


def classification_records(examples, spec, encoder: Encoder, seq_length: int):
  label_ids = {l: i for i, l in enumerate(spec.labels)}
  for index, ex in enumerate(examples):
    a, b = encoder.encode(ex.text_a), encoder.encode(ex.text_b)
    classifier_data_lib._truncate_seq_pair(a, b, seq_length - 3)  # pylint: disable=protected-access
    word_ids = [encoder.cls_id] + a + [encoder.sep_id] + b + [encoder.sep_id]
    type_ids = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    label = label_ids[ex.label] if ex.label is not None else 0
    yield _encode_record(word_ids, type_ids, seq_length, index,
                         {"label_id": np.array([label], np.int64)},
                         encoder.pad_id), None


def tagging_records(sentences, spec, encoder: Encoder, seq_length: int):
  """One record per chunk of words that fits; side rows locate the words."""
  label_ids = {l: i for i, l in enumerate(spec.labels)}
  max_pieces = seq_length - 2
  index = 0
  for sentence_index, (words, tags) in enumerate(sentences):
    word_pieces = []
    for word in words:
      pieces = encoder.encode(word) or [encoder.unk_id]
      word_pieces.append(pieces[:max_pieces])
    start = 0
    while start < len(words):
      end, used = start, 0
      while end < len(words) and used + len(word_pieces[end]) <= max_pieces:
        used += len(word_pieces[end])
        end += 1
      word_ids, labels, positions = [encoder.cls_id], [IGNORED_LABEL_ID], []
      for w in range(start, end):
        positions.append(len(word_ids))
        word_ids.extend(word_pieces[w])
        first_label = label_ids[tags[w]] if tags is not None else 0
        labels.extend([first_label] + [IGNORED_LABEL_ID] *
                      (len(word_pieces[w]) - 1))
      word_ids.append(encoder.sep_id)
      labels.append(IGNORED_LABEL_ID)
      if tags is None:  # unlabelled (test): nothing to learn from
        labels = [IGNORED_LABEL_ID] * len(labels)
      side = {"sentence": sentence_index, "word_start": start,
              "positions": positions}
      yield _encode_record(
          word_ids, [0] * len(word_ids), seq_length, index,
          {"label_ids": _pad(labels, seq_length, IGNORED_LABEL_ID)},
          encoder.pad_id), side
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


def span_records(examples, encoder: Encoder, seq_length: int, doc_stride: int,
                 max_query_length: int, is_training: bool):
  """Windows over each context; side rows (eval) hold what postprocessing needs."""
  index = 0
  skipped = 0
  for example_index, ex in enumerate(examples):
    query = encoder.encode(ex.question_text)[:max_query_length]
    doc_ids, tok_starts, tok_ends = (
        list(x) for x in encoder.encode_with_char_offsets(ex.paragraph_text))
    answer_tokens = None
    if is_training:
      char_start = ex.start_position
      char_end = char_start + len(ex.orig_answer_text) - 1
      covering = [i for i in range(len(doc_ids))
                  if tok_ends[i] >= char_start and tok_starts[i] <= char_end]
      if not covering:
        skipped += 1
        continue
      answer_tokens = (covering[0], covering[-1])
    max_doc = seq_length - len(query) - 3
    if max_doc <= 0:
      raise TaskDataError(f"seq_length {seq_length} leaves no room for the "
                          f"context after a {len(query)}-piece question; raise "
                          "--seq_length or lower --max_query_length.")
    spans = _doc_spans(len(doc_ids), max_doc, doc_stride)
    doc_offset = len(query) + 2
    for span_index, span in enumerate(spans):
      word_ids = ([encoder.cls_id] + query + [encoder.sep_id] +
                  doc_ids[span.start:span.start + span.length] + [encoder.sep_id])
      type_ids = [0] * doc_offset + [1] * (span.length + 1)
      start_position = end_position = 0
      if answer_tokens is not None:
        first, last = answer_tokens
        if first >= span.start and last < span.start + span.length:
          start_position = first - span.start + doc_offset
          end_position = last - span.start + doc_offset
      side = None
      if not is_training:
        side = {
            "example_index": example_index, "doc_offset": doc_offset,
            "tok_start_to_orig_index": tok_starts[span.start:span.start + span.length],
            "tok_end_to_orig_index": tok_ends[span.start:span.start + span.length],
            "token_is_max_context": [
                bool(squad_lib_sp._check_is_max_context(spans, span_index, span.start + i))  # pylint: disable=protected-access
                for i in range(span.length)],
        }
      yield _encode_record(
          word_ids, type_ids, seq_length, index,
          {"start_position": np.array([start_position], np.int64),
           "end_position": np.array([end_position], np.int64)},
          encoder.pad_id), side
      index += 1
  if skipped:
    logging.warning("%d training questions skipped: answer not mappable to "
                    "pieces.", skipped)


# --- Writing ---------------------------------------------------------------------


def _write_split(records: Iterable, directory: str, name: str,
                 write_side: bool) -> int:
  count = 0
  side_rows = []
  with tf.io.TFRecordWriter(fileio.join(directory, f"{name}.tfrecord")) as writer:
    for record, side in records:
      writer.write(record)
      if side is not None:
        side_rows.append(side)
      count += 1
      if count % 10000 == 0:
        logging.info("%s: %d records", name, count)
  if write_side:
    fileio.write_text(fileio.join(directory, f"{name}.side.jsonl"), "".join(
        json.dumps(row, ensure_ascii=False) + "\n" for row in side_rows))
  return count


def write_examples_side(directory, name, examples):
  fileio.write_text(fileio.join(directory, f"{name}.examples.jsonl"), "".join(
      json.dumps({"qas_id": ex.qas_id, "context": ex.paragraph_text},
                 ensure_ascii=False) + "\n" for ex in examples))


def _check_options(kind, seq_length, doc_stride, max_query_length):
  if seq_length is None:
    seq_length = kind.default_seq_length
  if seq_length < MIN_SEQ_LENGTH:
    raise TaskDataError(f"--seq_length {seq_length} is too short: [CLS], "
                        "[SEP] and the text need at least "
                        f"{MIN_SEQ_LENGTH} positions; use 128 (384 for QA).")
  for flag, value in (("--doc_stride", doc_stride),
                      ("--max_query_length", max_query_length)):
    if value < 1:
      raise TaskDataError(f"{flag} {value} must be at least 1.")
  return seq_length


def _split_jobs(spec, data_dir, languages, splits) -> List[Tuple[str, str, str]]:
  """(split, language, file) of every file to write, checked to exist."""
  jobs = [("train", "en", spec.path(data_dir, "train"))]
  for split in splits:
    if split not in spec.eval_files:
      continue
    split_languages = languages
    if split_languages is None:
      split_languages = discover_languages(spec, data_dir, split)
    elif spec.eval_languages(split) == ["en"]:
      split_languages = [l for l in split_languages if l == "en"]
    for lang in split_languages:
      jobs.append((split, lang, spec.path(data_dir, split, lang)))
  for _, _, path in jobs:
    _require_file(path, spec)
  return jobs


def _write_one_split(kind, spec, path, split, lang, encoder, seq_length,
                     options, out_dir) -> Dict:
  """Records, side files and gold labels of one file; its metadata entry."""
  name = f"{split}-{lang}"
  is_training = split == "train"
  data = kind.read(path, spec, is_training)
  count = _write_split(
      kind.records(data, spec, encoder, seq_length, options, is_training),
      out_dir, name, write_side=kind.writes_side_files and not is_training)
  if not is_training:
    if kind.write_examples_side is not None:
      kind.write_examples_side(out_dir, name, data.examples)
    if data.has_labels:
      label_name, content = kind.gold_text(name, data)
      fileio.write_bytes(fileio.join(out_dir, "labels", spec.name, label_name),
                         content)
  info = {"file": f"{name}.tfrecord", "source": fileio.as_str(path),
          "num_examples": len(data.examples), "num_features": count,
          "has_labels": bool(is_training or data.has_labels)}
  info.update({k: v for k, v in data.info.items() if k != "source_file"})
  return info


def create_finetuning_data(task: str, data_dir, sp_model, output_dir,
                           seq_length: Optional[int] = None,
                           doc_stride: int = 128, max_query_length: int = 64,
                           languages: Optional[Sequence[str]] = None,
                           splits: Sequence[str] = ("dev", "test"),
                           overwrite: bool = False,
                           progress=print) -> Dict:
  """Writes the records of one task; returns its metadata dict.

  `languages`: the dev / test languages to write (default: every language
  present in data_dir); a requested language whose file is missing is an error.
  The output directory appears complete or not at all; with `overwrite` the
  old one stays until the new one is whole.
  """
  from rembert_tf.finetuning import task_types  # pylint: disable=g-import-not-at-top
  spec = tasks.get_task(task)
  kind = task_types.get(spec.task_type)
  seq_length = _check_options(kind, seq_length, doc_stride, max_query_length)
  encoder = Encoder(sp_model)
  data_dir = fileio.as_str(data_dir)
  jobs = _split_jobs(spec, data_dir, languages, splits)
  meta = {"task": task, "task_type": spec.task_type, "seq_length": seq_length,
          "labels": list(spec.labels), "score_split": spec.score_split,
          "sp_model": fileio.as_str(sp_model),
          "sp_model_sha256": fileio.sha256(sp_model),
          "doc_stride": doc_stride, "max_query_length": max_query_length,
          "data_dir": data_dir, "splits": {}}
  options = {"doc_stride": doc_stride, "max_query_length": max_query_length}
  with fileio.atomic_directory(fileio.join(output_dir, task),
                               overwrite=overwrite) as tmp:
    fileio.makedirs(fileio.join(tmp, "labels", task))
    for split, lang, path in jobs:
      info = _write_one_split(kind, spec, path, split, lang, encoder,
                              seq_length, options, tmp)
      meta["splits"].setdefault(split, {})[lang] = info
      progress(f"[create_finetuning_data] {task} {split}-{lang}: "
               f"{info['num_examples']} examples -> {info['num_features']} "
               "records")
    fileio.write_text(fileio.join(tmp, METADATA_FILE),
                      json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
  return meta


def read_metadata(records_dir) -> Dict:
  path = fileio.join(records_dir, METADATA_FILE)
  if not fileio.isfile(path):
    raise TaskDataError(
        f"{path} does not exist: {records_dir} is not a fine-tuning records "
        "directory; make one with tools/create_finetuning_data.py --task T "
        "--output_dir O (records land in O/T/).")
  try:
    return json.loads(fileio.read_text(path))
  except (ValueError, UnicodeDecodeError) as e:
    raise TaskDataError(f"{path} is not valid JSON ({e}); recreate the "
                        "records with tools/create_finetuning_data.py.") from None


def read_side_file(records_dir, name: str, suffix: str = "side") -> List[Dict]:
  path = fileio.join(records_dir, f"{name}.{suffix}.jsonl")
  return [json.loads(line) for line in fileio.read_text(path).splitlines()
          if line.strip()]
