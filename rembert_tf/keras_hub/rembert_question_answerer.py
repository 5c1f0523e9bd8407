"""RemBertQuestionAnswerer: extractive span QA on RemBERT, as a keras-hub Task.

Builds on `keras_hub.models.Task` (preset loading, `fit`, `save_to_preset`)
with the head of Model Garden's `BertSpanLabeler`, which the project's QA
fine-tuning uses: one dense layer from `sequence_output` to two logits per
position, the answer's start and end. The loss is the mean of the start and
end cross-entropies (as the project's span task). `predict` returns the start
and end logits, as keras-hub's tasks return their outputs; the answer text,
over every window of a long context, is read back from them by the project's
`windowed_tasks.predict_answers` (the SQuAD recipe of its post-processing).

Example:
<!-- snippet: not run: needs the `[keras]` extra (Keras 3, keras-hub) and a preset converted from a checkpoint -->
```python
from rembert_tf.keras_hub import RemBertQuestionAnswerer
qa = RemBertQuestionAnswerer.from_preset("presets/rembert")
qa.fit(x=(["Where is the tower?"], ["The Eiffel Tower is in Paris."]),
       y=([23], ["Paris"]), epochs=2)
qa.predict(x=(["Where is the tower?"], ["The Eiffel Tower is in Paris."]))
```
"""
import keras
import keras_hub
from keras import ops

from rembert_tf.keras_hub import rembert_backbone
from rembert_tf.keras_hub.rembert_question_answerer_preprocessor import (
    RemBertQuestionAnswererPreprocessor)


@keras.saving.register_keras_serializable(package="rembert_tf")
class RemBertQuestionAnswerer(keras_hub.models.Task):
  """RemBERT for extractive question answering: answer start and end logits.

  One dense layer from the backbone's `sequence_output` to two logits per
  position: `{"start_logits": [batch, sequence_length], "end_logits":
  [batch, sequence_length]}`. The default loss is the mean of the start
  and end cross-entropies.

  Args:
    backbone: a `RemBertBackbone`.
    preprocessor: a `RemBertQuestionAnswererPreprocessor` or None.

  Examples:
  <!-- snippet: not run: needs the `rembert_multi` preset, which keras-hub publishes -->
  ```python
  qa = keras_hub.models.RemBertQuestionAnswerer.from_preset("rembert_multi")
  questions = ["Where is the tower?"]
  contexts = ["The Eiffel Tower is in Paris."]
  qa.fit(x=(questions, contexts), y=([23], ["Paris"]))
  qa.predict(x=(questions, contexts))  # {"start_logits", "end_logits"}
  ```
  """

  backbone_cls = rembert_backbone.RemBertBackbone
  preprocessor_cls = RemBertQuestionAnswererPreprocessor

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
