"""The fine-tuning task types on the model side: one registry entry per type.

A `TaskType` (sentence-pair classification, per-word tagging, span QA) holds
what differs per type once records exist: the head (Model Garden's
`BertClassifier`, `BertTokenClassifier`, `BertSpanLabeler`), the per-item
loss statistics and the prediction writer (QA through Model Garden's
`squad_lib_sp.postprocess_output`). How a type's records are made is
`data.xtreme_records.RECORD_TYPES`.

Example:
```python
from rembert_tf.finetuning import task_types
task_types.get("tagging").encoder_output_range   # None: the head reads all
```
"""
import collections
import dataclasses
import json
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf
import tf_keras
from official.nlp.data import squad_lib_sp
from official.nlp.modeling import models

from rembert_tf.data import xtreme_records


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
  """Everything that differs between task types in training and prediction."""
  name: str
  build_head: Callable[..., tf_keras.Model]
  # Positions of the last Transformer block the head reads (the encoder's
  # output_range): 1 for a head on the pooled [CLS] position, None for all.
  encoder_output_range: Optional[int]
  logits: Callable[[Any], Dict[str, tf.Tensor]]
  # The weight of each loss item (0 for ignored ones), from the labels alone.
  item_weights: Callable[[Dict[str, tf.Tensor]], tf.Tensor]
  statistics: Callable[[Dict[str, tf.Tensor], Dict[str, tf.Tensor]],
                       Tuple[tf.Tensor, tf.Tensor, tf.Tensor]]
  prediction_text: Callable[[PredictionContext, Dict[str, np.ndarray]], str]


def _cross_entropy_and_correct(labels, logits):
  labels = tf.cast(labels, tf.int32)
  safe = tf.maximum(labels, 0)
  cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=safe, logits=logits)
  correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                             safe), tf.float32)
  return cross_entropy, correct


def _one_per_example(features):
  return tf.ones_like(features["feature_index"][:, 0], tf.float32)


def _labelled_tokens(features):
  return tf.cast(features["label_ids"] >= 0, tf.float32)


def _classification_statistics(features, logits):
  cross_entropy, correct = _cross_entropy_and_correct(
      features["label_id"][:, 0], logits["logits"])
  return cross_entropy, correct, _one_per_example(features)


def _tagging_statistics(features, logits):
  cross_entropy, correct = _cross_entropy_and_correct(features["label_ids"],
                                                      logits["logits"])
  return cross_entropy, correct, _labelled_tokens(features)


def _span_statistics(features, logits):
  start_ce, start_ok = _cross_entropy_and_correct(
      features["start_position"][:, 0], logits["start_logits"])
  end_ce, end_ok = _cross_entropy_and_correct(
      features["end_position"][:, 0], logits["end_logits"])
  return ((start_ce + end_ce) / 2, (start_ok + end_ok) / 2,
          _one_per_example(features))


def _classification_text(context, outputs):
  predicted = np.argmax(outputs["logits"], axis=-1)
  return "".join(context.labels[i] + "\n" for i in predicted)


def _tagging_text(context, outputs):
  """One tag per word (O for a word in no record), a blank line after each
  sentence."""
  side = xtreme_records.read_side_file(context.records_dir, context.name)
  sentences = [["O"] * n for n in context.info["num_words"]]
  predicted = np.argmax(outputs["logits"], axis=-1)
  for row, record_tags in zip(side, predicted):
    for offset, position in enumerate(row["positions"]):
      sentences[row["sentence"]][row["word_start"] + offset] = context.labels[
          record_tags[position]]
  return "".join("".join(t + "\n" for t in tags) + "\n" for tags in sentences)


def _span_text(context, outputs):
  """n-best spans -> answer text with Model Garden's squad_lib_sp postprocessing."""
  side = xtreme_records.read_side_file(context.records_dir, context.name)
  examples = [squad_lib_sp.SquadExample(qas_id=row["qas_id"], question_text="",
                                        paragraph_text=row["context"])
              for row in xtreme_records.read_side_file(
                  context.records_dir, context.name, "examples")]
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


CLASSIFICATION = TaskType(
    name="classification",
    build_head=lambda encoder, num_labels, dropout_rate, initializer:
    models.BertClassifier(network=encoder, num_classes=num_labels,
                          initializer=initializer, dropout_rate=dropout_rate),
    # The classifier reads pooled_output, computed from position 0 alone.
    encoder_output_range=1,
    logits=lambda outputs: {"logits": tf.cast(outputs, tf.float32)},
    item_weights=_one_per_example,
    statistics=_classification_statistics,
    prediction_text=_classification_text)

TAGGING = TaskType(
    name="tagging",
    build_head=lambda encoder, num_labels, dropout_rate, initializer:
    models.BertTokenClassifier(network=encoder, num_classes=num_labels,
                               initializer=initializer,
                               dropout_rate=dropout_rate),
    encoder_output_range=None,
    logits=lambda outputs: {"logits": tf.cast(outputs["logits"], tf.float32)},
    item_weights=_labelled_tokens,
    statistics=_tagging_statistics,
    prediction_text=_tagging_text)

SPAN = TaskType(
    name="span",
    build_head=lambda encoder, num_labels, dropout_rate, initializer:
    models.BertSpanLabeler(network=encoder, initializer=initializer),
    encoder_output_range=None,
    # BertSpanLabeler's outputs: [start_logits, end_logits].
    logits=lambda outputs: {"start_logits": tf.cast(outputs[0], tf.float32),
                            "end_logits": tf.cast(outputs[1], tf.float32)},
    item_weights=_one_per_example,
    statistics=_span_statistics,
    prediction_text=_span_text)

TASK_TYPES = {t.name: t for t in (CLASSIFICATION, TAGGING, SPAN)}


def get(name: str) -> TaskType:
  xtreme_records.record_type(name)  # an unknown type: one line naming the fix
  return TASK_TYPES[name]
