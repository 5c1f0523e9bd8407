"""The fine-tuning task types: one registry entry per type, the only switch.

A `TaskType` (sentence-pair classification, per-word tagging, span QA) holds
all that differs per type: reading files and TFDS rows, records and their
spec, gold labels, the head (Model Garden's `BertClassifier`,
`BertTokenClassifier`, `BertSpanLabeler`), per-item loss statistics and the
prediction writer. Nothing else in rembert_tf branches on the task type.

Example:
```python
from rembert_tf.finetuning import task_types
kind = task_types.get("tagging")
sorted(kind.label_features(128))        # ['label_ids']
```
"""
import collections
import dataclasses
import json
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np
import tensorflow as tf
import tf_keras
from official.nlp.data import squad_lib_sp
from official.nlp.modeling import models

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.evaluation import xtreme_scorer
from rembert_tf.evaluation import xtreme_tasks
from rembert_tf.finetuning import example_records
from rembert_tf.finetuning import xtreme_readers

IGNORED_LABEL_ID = example_records.IGNORED_LABEL_ID


@dataclasses.dataclass(frozen=True)
class SplitData:
  """One task split read for record creation."""
  examples: List[Any]
  has_labels: bool
  info: Dict[str, Any]           # extra metadata of the split (num_words, ...)
  # QA: the split as SQuAD v1.1 JSON, the scorer's gold file.
  squad_json: Optional[bytes] = None


@dataclasses.dataclass(frozen=True)
class PredictionContext:
  """What a prediction writer needs about one split of one language."""
  records_dir: str
  name: str                      # "<split>-<lang>"
  info: Dict[str, Any]           # the split's metadata entry
  labels: List[str]
  n_best_size: int = 20
  max_answer_length: int = 30


@dataclasses.dataclass(frozen=True)
class TaskType:
  """Everything that differs between fine-tuning task types."""
  name: str
  # Data: a task file, or rows (`xtreme_tfds`) with the origin they name.
  read: Callable[[str, Any, bool], SplitData]
  from_rows: Callable[[List[Dict], Any, bool, str], SplitData]
  records: Callable[..., Iterable[Tuple[bytes, Optional[Dict]]]]
  gold_text: Callable[[str, SplitData], Optional[Tuple[str, bytes]]]
  writes_side_files: bool
  # Writes what prediction needs beyond the side rows (QA: the contexts).
  write_examples_side: Optional[Callable[[str, str, List[Any]], None]]
  default_seq_length: int
  label_features: Callable[[int], Dict[str, tf.io.FixedLenFeature]]
  # Model.
  build_head: Callable[..., tf_keras.Model]
  # Positions of the last Transformer block the head reads (the encoder's
  # output_range): 1 for a head on the pooled [CLS] position, None for all.
  encoder_output_range: Optional[int]
  logits: Callable[[Any], Dict[str, tf.Tensor]]
  # The weight of each loss item (0 for ignored ones), from the labels alone.
  item_weights: Callable[[Dict[str, tf.Tensor]], tf.Tensor]
  statistics: Callable[[Dict[str, tf.Tensor], Dict[str, tf.Tensor]],
                       Tuple[tf.Tensor, tf.Tensor, tf.Tensor]]
  # Predictions.
  prediction_text: Callable[[PredictionContext, Dict[str, np.ndarray]], str]


def _cross_entropy_and_correct(labels, logits):
  labels = tf.cast(labels, tf.int32)
  safe = tf.maximum(labels, 0)
  cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=safe, logits=logits)
  correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                             safe), tf.float32)
  return cross_entropy, correct


# --- Sentence-pair classification (xnli, pawsx) ------------------------------


def _pairs_split(examples, is_training, origin) -> SplitData:
  has_labels = bool(examples) and all(ex.label is not None for ex in examples)
  if is_training and not has_labels:
    raise xtreme_tasks.TaskDataError(
        f"{origin}: training rows need a label column (sentence1<TAB>sentence2"
        "<TAB>label).")
  return SplitData(examples, has_labels, {})


def _read_pairs(path, dataset, is_training) -> SplitData:
  return _pairs_split(xtreme_readers.read_sentence_pairs(
      path, dataset, with_labels=True), is_training, path)


def _pairs_from_rows(rows, dataset, is_training, origin) -> SplitData:
  return _pairs_split(xtreme_readers.sentence_pair_examples(
      [(r["where"], r["text_a"].strip(), r["text_b"].strip(), r.get("label"))
       for r in rows], dataset, origin), is_training, origin)


def _pairs_gold(name, data: SplitData):
  return f"{name}.tsv", "".join(ex.label + "\n" for ex in data.examples
                               ).encode("utf-8")


def _one_per_example(features):
  return tf.ones_like(features["feature_index"][:, 0], tf.float32)


def _classification_statistics(features, logits):
  cross_entropy, correct = _cross_entropy_and_correct(
      features["label_id"][:, 0], logits["logits"])
  return cross_entropy, correct, _one_per_example(features)


def _classification_text(context, outputs):
  predicted = np.argmax(outputs["logits"], axis=-1)
  return "".join(context.labels[i] + "\n" for i in predicted)


CLASSIFICATION = TaskType(
    name="classification",
    read=_read_pairs,
    from_rows=_pairs_from_rows,
    records=lambda data, dataset, tokenizer, seq_length, options, is_training:
    example_records.classification_records(data.examples, dataset,
                                           tokenizer, seq_length),
    gold_text=_pairs_gold,
    writes_side_files=False,
    write_examples_side=None,
    default_seq_length=128,
    label_features=lambda seq_length: {
        "label_id": tf.io.FixedLenFeature([1], tf.int64)},
    build_head=lambda encoder, num_labels, dropout_rate, initializer:
    models.BertClassifier(network=encoder, num_classes=num_labels,
                          initializer=initializer, dropout_rate=dropout_rate),
    # The classifier reads pooled_output, computed from position 0 alone.
    encoder_output_range=1,
    logits=lambda outputs: {"logits": tf.cast(outputs, tf.float32)},
    item_weights=_one_per_example,
    statistics=_classification_statistics,
    prediction_text=_classification_text)


# --- Per-word tagging (panx) ---------------------------------------------------


def _tagged_split(sentences, is_training, origin) -> SplitData:
  has_labels = bool(sentences) and all(t is not None for _, t in sentences)
  if is_training and not has_labels:
    raise xtreme_tasks.TaskDataError(
        f"{origin}: training lines need token<TAB>tag.")
  return SplitData(sentences, has_labels,
                   {"num_words": [len(words) for words, _ in sentences]})


def _read_tagged(path, dataset, is_training) -> SplitData:
  return _tagged_split(xtreme_readers.read_tagged_sentences(
      path, dataset, with_labels=True), is_training, path)


def _tagged_from_rows(rows, dataset, is_training, origin) -> SplitData:
  """Rows of words and tags; sentences without words are left out."""
  sentences = [([w.strip() for w in r["words"]],
                xtreme_readers.check_tags(list(r["tags"]), r["where"], dataset)
                if r.get("tags") is not None else None)
               for r in rows if r["words"]]
  return _tagged_split(sentences, is_training, origin)


def _tagged_gold(name, data: SplitData):
  return f"{name}.tsv", "".join(
      "".join(t + "\n" for t in tags) + "\n"
      for _, tags in data.examples).encode("utf-8")


def _labelled_tokens(features):
  return tf.cast(features["label_ids"] >= 0, tf.float32)


def _tagging_statistics(features, logits):
  cross_entropy, correct = _cross_entropy_and_correct(features["label_ids"],
                                                      logits["logits"])
  return cross_entropy, correct, _labelled_tokens(features)


def _tagging_text(context, outputs):
  side = example_records.read_side_file(context.records_dir, context.name)
  sentences = [["O"] * n for n in context.info["num_words"]]
  predicted = np.argmax(outputs["logits"], axis=-1)
  for row, record_tags in zip(side, predicted):
    for offset, position in enumerate(row["positions"]):
      sentences[row["sentence"]][row["word_start"] + offset] = context.labels[
          record_tags[position]]
  return "".join("".join(t + "\n" for t in tags) + "\n" for tags in sentences)


TAGGING = TaskType(
    name="tagging",
    read=_read_tagged,
    from_rows=_tagged_from_rows,
    records=lambda data, dataset, tokenizer, seq_length, options, is_training:
    example_records.tagging_records(data.examples, dataset, tokenizer,
                                    seq_length),
    gold_text=_tagged_gold,
    writes_side_files=True,
    write_examples_side=None,
    default_seq_length=128,
    label_features=lambda seq_length: {
        "label_ids": tf.io.FixedLenFeature([seq_length], tf.int64)},
    build_head=lambda encoder, num_labels, dropout_rate, initializer:
    models.BertTokenClassifier(network=encoder, num_classes=num_labels,
                               initializer=initializer,
                               dropout_rate=dropout_rate),
    encoder_output_range=None,
    logits=lambda outputs: {"logits": tf.cast(outputs["logits"], tf.float32)},
    item_weights=_labelled_tokens,
    statistics=_tagging_statistics,
    prediction_text=_tagging_text)


# --- Extractive span QA (xquad, mlqa, tydiqa) ------------------------------------


def _read_squad(path, dataset, is_training) -> SplitData:
  examples = xtreme_readers.read_squad_examples(path, dataset, is_training)
  has_labels = is_training or xtreme_scorer.has_gold_answers(
      xtreme_scorer.read_squad_answers(path))
  return SplitData(examples, has_labels, {},
                   squad_json=fileio.read_bytes(path))


def _squad_json(rows) -> Dict:
  """Rows of one question each -> SQuAD v1.1 JSON (a paragraph per row)."""
  return {"version": "1.1", "data": [{"title": "", "paragraphs": [{
      "context": r["context"],
      "qas": [{"id": str(r["id"]), "question": r["question"], "answers": [
          {"text": text, "answer_start": int(start)} for text, start in
          zip(r["answers"]["text"], r["answers"]["answer_start"])]}]}]}
                                    for r in rows]}


def _squad_from_rows(rows, dataset, is_training, origin) -> SplitData:
  del dataset
  data = _squad_json(rows)
  examples = xtreme_readers.squad_examples(data, origin, is_training)
  has_labels = is_training or xtreme_scorer.has_gold_answers(
      {str(r["id"]): r["answers"]["text"] for r in rows})
  return SplitData(examples, has_labels, {}, squad_json=json.dumps(
      data, ensure_ascii=False).encode("utf-8"))


def _squad_gold(name, data: SplitData):
  return f"{name}.json", data.squad_json


def _span_statistics(features, logits):
  start_ce, start_ok = _cross_entropy_and_correct(
      features["start_position"][:, 0], logits["start_logits"])
  end_ce, end_ok = _cross_entropy_and_correct(
      features["end_position"][:, 0], logits["end_logits"])
  return ((start_ce + end_ce) / 2, (start_ok + end_ok) / 2,
          _one_per_example(features))


def _span_logits(outputs):
  if isinstance(outputs, dict):
    start, end = outputs["start_logits"], outputs["end_logits"]
  else:
    start, end = outputs
  return {"start_logits": tf.cast(start, tf.float32),
          "end_logits": tf.cast(end, tf.float32)}


def _span_text(context, outputs):
  """n-best spans -> answer text with Model Garden's squad_lib_sp postprocessing."""
  side = example_records.read_side_file(context.records_dir, context.name)
  example_rows = example_records.read_side_file(context.records_dir,
                                                context.name, "examples")
  examples = [squad_lib_sp.SquadExample(qas_id=row["qas_id"], question_text="",
                                        paragraph_text=row["context"])
              for row in example_rows]
  raw_result = collections.namedtuple("RawResult",
                                      ["unique_id", "start_logits", "end_logits"])
  features, results = [], []
  for unique_id, row in enumerate(side):
    doc_offset = row["doc_offset"]
    features.append(squad_lib_sp.InputFeatures(
        unique_id=unique_id, example_index=row["example_index"],
        doc_span_index=None,
        tok_start_to_orig_index=row["tok_start_to_orig_index"],
        tok_end_to_orig_index=row["tok_end_to_orig_index"],
        token_is_max_context={doc_offset + i: v for i, v in
                              enumerate(row["token_is_max_context"])},
        # postprocess_output finds the context start after the first [SEP].
        tokens=["[CLS]"] + [""] * (doc_offset - 2) + ["[SEP]"],
        input_ids=None, input_mask=None, segment_ids=None, paragraph_len=None))
    results.append(raw_result(unique_id,
                              outputs["start_logits"][unique_id].tolist(),
                              outputs["end_logits"][unique_id].tolist()))
  predictions, _, _ = squad_lib_sp.postprocess_output(
      examples, features, results, n_best_size=context.n_best_size,
      max_answer_length=context.max_answer_length, do_lower_case=False)
  return json.dumps(dict(predictions), ensure_ascii=False, indent=1) + "\n"


SPAN = TaskType(
    name="span",
    read=_read_squad,
    from_rows=_squad_from_rows,
    records=lambda data, dataset, tokenizer, seq_length, options, is_training:
    example_records.span_records(data.examples, tokenizer, seq_length,
                                 options["doc_stride"],
                                 options["max_query_length"], is_training),
    gold_text=_squad_gold,
    writes_side_files=True,
    write_examples_side=example_records.write_examples_side,
    default_seq_length=384,
    label_features=lambda seq_length: {
        "start_position": tf.io.FixedLenFeature([1], tf.int64),
        "end_position": tf.io.FixedLenFeature([1], tf.int64)},
    build_head=lambda encoder, num_labels, dropout_rate, initializer:
    models.BertSpanLabeler(network=encoder, initializer=initializer),
    encoder_output_range=None,
    logits=_span_logits,
    item_weights=_one_per_example,
    statistics=_span_statistics,
    prediction_text=_span_text)


TASK_TYPES = {t.name: t for t in (CLASSIFICATION, TAGGING, SPAN)}


def get(name: str) -> TaskType:
  if name not in TASK_TYPES:
    raise errors.InputError(
        f"Unknown fine-tuning task type {name!r} (in the records' "
        f"metadata.json field task_type); known: {', '.join(TASK_TYPES)}. "
        "Recreate the records with rembert-create-finetuning-data.")
  return TASK_TYPES[name]


MODEL_INPUT_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


def feature_spec(task_type: str, seq_length: int) -> Dict:
  """The record spec of a task type: model inputs, feature_index, labels."""
  spec = {key: tf.io.FixedLenFeature([seq_length], tf.int64)
          for key in MODEL_INPUT_KEYS}
  spec["feature_index"] = tf.io.FixedLenFeature([1], tf.int64)
  spec.update(get(task_type).label_features(seq_length))
  return spec
