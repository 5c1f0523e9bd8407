"""RemBertQuestionAnswerer: extractive span QA on RemBERT, as a keras-hub Task.

Builds on `keras_hub.models.Task` (preset loading, `fit`, `save_to_preset`)
with the head of Model Garden's `BertSpanLabeler`, which the project's QA
fine-tuning uses: one dense layer from `sequence_output` to two logits per
position, the answer's start and end. The loss is the mean of the start and
end cross-entropies (as the project's span task). `predict_answers` reads the
answer as the project's post-processing does (the SQuAD recipe): the
`n_best_size` best starts and ends of every window, pairs inside the
window's context with start <= end, at most `max_answer_length` pieces, the
start read in its max-context window; the best start + end logit wins and its
characters are cut from the untouched context.

Example:
<!-- snippet: not run: needs the `[keras]` extra (Keras 3, keras-hub) and a preset converted from a checkpoint -->
```python
from rembert_tf.keras_hub import RemBertQuestionAnswerer
qa = RemBertQuestionAnswerer.from_preset("presets/rembert")
features = qa.preprocessor.encode(questions, contexts, answer_starts, answer_texts)
qa.fit(features.inputs, {"start_logits": features.start_positions,
                         "end_logits": features.end_positions}, epochs=2)
qa.predict_answers(["Where is the tower?"], ["The Eiffel Tower is in Paris."])
```
"""
from typing import List, Sequence

import keras
import keras_hub
import numpy as np
from keras import ops

from rembert_tf.keras_hub import rembert_backbone
from rembert_tf.keras_hub import rembert_question_answerer_preprocessor


@keras.saving.register_keras_serializable(package="rembert_tf")
class RemBertQuestionAnswerer(keras_hub.models.Task):
  """Sequence output -> dense(2) -> {"start_logits", "end_logits"} [batch, seq].

  Args:
    backbone: a `RemBertBackbone`.
    preprocessor: a `RemBertQuestionAnswererPreprocessor` or None.
  """

  backbone_cls = rembert_backbone.RemBertBackbone
  preprocessor_cls = (rembert_question_answerer_preprocessor
                      .RemBertQuestionAnswererPreprocessor)

  def __init__(self, backbone, preprocessor=None, **kwargs):
    # === Layers ===
    self.backbone = backbone
    self.preprocessor = preprocessor
    self.span_dense = rembert_backbone.head_dense(backbone, 2, "span_logits")
    # === Functional model ===
    inputs = backbone.input
    logits = self.span_dense(backbone(inputs)["sequence_output"])
    logits = ops.cast(logits, "float32")
    outputs = {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)

  def compile(self, optimizer="auto", loss="auto", *, metrics="auto",
              **kwargs):
    """Defaults: Adam 5e-5; the mean of the start and end cross-entropies;
    start and end accuracy."""
    if optimizer == "auto":
      optimizer = keras.optimizers.Adam(5e-5)
    if loss == "auto":
      loss = {name: keras.losses.SparseCategoricalCrossentropy(
          from_logits=True) for name in ("start_logits", "end_logits")}
      kwargs.setdefault("loss_weights",
                        {"start_logits": 0.5, "end_logits": 0.5})
    if metrics == "auto":
      metrics = {name: [keras.metrics.SparseCategoricalAccuracy()]
                 for name in ("start_logits", "end_logits")}
    super().compile(optimizer=optimizer, loss=loss, metrics=metrics,
                    **kwargs)

  def predict_answers(self, questions: Sequence[str], contexts: Sequence[str],
                      batch_size: int = 32, n_best_size: int = 20,
                      max_answer_length: int = 30) -> List[str]:
    """The answer text of each question ("" when no valid span)."""
    features = self.preprocessor.encode(questions, contexts)
    logits = self.predict(features.inputs, batch_size=batch_size, verbose=0)
    starts = np.asarray(logits["start_logits"])
    ends = np.asarray(logits["end_logits"])
    best = [(None, "")] * len(questions)
    for row, window in enumerate(features.windows):
      for score, first, last in _window_spans(
          window, starts[row], ends[row], n_best_size, max_answer_length):
        if best[window.example][0] is None or score > best[window.example][0]:
          text = contexts[window.example][
              window.char_starts[first]:window.char_ends[last] + 1].strip()
          best[window.example] = (score, text)
    return [text for _, text in best]


def _window_spans(window, start_logits, end_logits, n_best_size,
                  max_answer_length):
  """(score, first, last context piece) of the valid candidate spans."""
  pieces = len(window.char_starts)
  top = lambda logits: np.argsort(-logits, kind="stable")[:n_best_size]
  for start in top(start_logits):
    first = int(start) - window.doc_offset
    if not 0 <= first < pieces or not window.max_context[first]:
      continue
    for end in top(end_logits):
      last = int(end) - window.doc_offset
      if not first <= last < pieces or last - first + 1 > max_answer_length:
        continue
      yield float(start_logits[start] + end_logits[end]), first, last
