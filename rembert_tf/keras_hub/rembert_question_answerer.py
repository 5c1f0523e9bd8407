"""RemBertQuestionAnswerer: extractive span QA on RemBERT, as a keras-hub Task.

Builds on `keras_hub.models.Task` with the head of Model Garden's
`BertSpanLabeler`; `windowed_tasks.predict_answers` reads answer texts back
from `predict`'s logits.
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
