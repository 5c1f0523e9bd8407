"""RemBertTokenClassifier: per-word tagging (NER, POS) on RemBERT, as a keras-hub Task.

Builds on `keras_hub.models.Task` with the head of Model Garden's
`BertTokenClassifier`; `windowed_tasks.predict_tags` reads each word's tag
back from `predict`'s logits.
"""
import keras
import keras_hub

from rembert_tf.keras_hub import rembert_backbone
from rembert_tf.keras_hub import rembert_token_classifier_preprocessor


@keras.saving.register_keras_serializable(package="rembert_tf")
class RemBertTokenClassifier(keras_hub.models.Task):
  """RemBERT for per-word tagging (NER, POS): a tag's logits at every piece.

  The backbone's `sequence_output`, dropout, then a dense layer to
  `num_classes` logits at every position ([batch, sequence_length,
  num_classes]). Trained on each word's first piece only: the
  preprocessor gives it weight 1 and every other position 0, and `compile`'s
  default metric is weighted.

  Args:
    backbone: a `RemBertBackbone`.
    num_classes: number of tags.
    preprocessor: a `RemBertTokenClassifierPreprocessor` or None.
    dropout: dropout rate before the dense layer.

  Examples:
  <!-- snippet: not run: needs the `rembert_multi` preset, which keras-hub publishes -->
  ```python
  words = [["Ann", "lives", "in", "Rome"], ["the", "dog", "runs", "fast"]]
  tags = [[1, 0, 0, 5], [0, 0, 0, 0]]
  tagger = keras_hub.models.RemBertTokenClassifier.from_preset(
      "rembert_multi", num_classes=7)
  tagger.fit(x=words, y=tags, batch_size=2)
  tagger.predict(words)  # [2, sequence_length, 7] logits.
  ```
  """

  backbone_cls = rembert_backbone.RemBertBackbone
  preprocessor_cls = (
      rembert_token_classifier_preprocessor.RemBertTokenClassifierPreprocessor)

  def __init__(self, backbone, num_classes, preprocessor=None, dropout=0.1,
               **kwargs):
    # === Layers ===
    self.backbone = backbone
    self.preprocessor = preprocessor
    self.output_dropout = keras.layers.Dropout(
        dropout, dtype=backbone.dtype_policy, name="classifier_dropout")
    self.output_dense = rembert_backbone.head_dense(backbone, num_classes,
                                                    "logits")
    # === Functional model ===
    inputs = backbone.input
    sequence_output = backbone(inputs)["sequence_output"]
    outputs = self.output_dense(self.output_dropout(sequence_output))
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    # === Config ===
    self.num_classes = num_classes
    self.dropout = dropout

  def compile(self, optimizer="auto", loss="auto", *,
              weighted_metrics="auto", **kwargs):
    """Defaults: Adam 5e-5, cross-entropy on logits weighted by the first-piece
    weights, weighted accuracy over labelled pieces."""
    if optimizer == "auto":
      optimizer = keras.optimizers.Adam(5e-5)
    if loss == "auto":
      loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if weighted_metrics == "auto":
      weighted_metrics = [keras.metrics.SparseCategoricalAccuracy()]
    super().compile(optimizer=optimizer, loss=loss,
                    weighted_metrics=weighted_metrics, **kwargs)

  def get_config(self):
    config = super().get_config()
    config.update(num_classes=self.num_classes, dropout=self.dropout)
    return config
