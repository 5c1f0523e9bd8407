"""RemBertTextClassifier: a classifier on RemBERT's pooled output.

Builds on `keras_hub.models.TextClassifier` with the head of Model Garden's
`BertClassifier`: dropout on `pooled_output`, then dense logits
(docs/keras_hub.md fine-tunes it).
"""
import keras
import keras_hub

from rembert_tf.keras_hub import rembert_backbone
from rembert_tf.keras_hub import rembert_text_classifier_preprocessor


@keras.saving.register_keras_serializable(package="rembert_tf")
class RemBertTextClassifier(keras_hub.models.TextClassifier):
  """Pooled output -> dropout -> dense logits.

  Args:
    backbone: a `RemBertBackbone`.
    num_classes: number of classes.
    preprocessor: a `RemBertTextClassifierPreprocessor` or None (inputs are
      then the backbone's dict).
    activation: on the logits (None: `fit` reads logits).
    dropout: dropout rate before the dense layer.
  """

  backbone_cls = rembert_backbone.RemBertBackbone
  preprocessor_cls = (
      rembert_text_classifier_preprocessor.RemBertTextClassifierPreprocessor)

  def __init__(self, backbone, num_classes, preprocessor=None,
               activation=None, dropout=0.1, **kwargs):
    # === Layers ===
    self.backbone = backbone
    self.preprocessor = preprocessor
    self.output_dropout = keras.layers.Dropout(
        dropout, dtype=backbone.dtype_policy, name="classifier_dropout")
    self.output_dense = rembert_backbone.head_dense(
        backbone, num_classes, "logits", activation=activation)
    # === Functional model ===
    inputs = backbone.input
    pooled = backbone(inputs)["pooled_output"]
    outputs = self.output_dense(self.output_dropout(pooled))
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    # === Config ===
    self.num_classes = num_classes
    self.activation = keras.activations.get(activation)
    self.dropout = dropout

  def get_config(self):
    config = super().get_config()
    config.update(num_classes=self.num_classes,
                  activation=keras.activations.serialize(self.activation),
                  dropout=self.dropout)
    return config
