"""RemBertMaskedLM: the backbone with RemBERT's decoupled masked-LM output side.

Builds on `keras_hub.models.MaskedLM` with `RemBertMaskedLMHead`, so
pre-training continues from the released model (docs/keras_hub.md).
"""
import keras
import keras_hub

from rembert_tf.keras_hub import rembert_backbone
from rembert_tf.keras_hub import rembert_masked_lm_head
from rembert_tf.keras_hub import rembert_masked_lm_preprocessor


@keras.saving.register_keras_serializable(package="rembert_tf")
class RemBertMaskedLM(keras_hub.models.MaskedLM):
  """Backbone + decoupled MLM head; inputs add `mask_positions`.

  Args:
    backbone: a `RemBertBackbone`.
    output_embedding_dim: E_out (1664 in the release). Default: the
      backbone's `embedding_dim` (a fresh head of the input width).
    preprocessor: a `RemBertMaskedLMPreprocessor` or None.
  """

  backbone_cls = rembert_backbone.RemBertBackbone
  preprocessor_cls = (
      rembert_masked_lm_preprocessor.RemBertMaskedLMPreprocessor)

  def __init__(self, backbone, output_embedding_dim=None, preprocessor=None,
               **kwargs):
    if output_embedding_dim is None:
      output_embedding_dim = backbone.embedding_dim
    # === Layers ===
    self.backbone = backbone
    self.preprocessor = preprocessor
    self.masked_lm_head = rembert_masked_lm_head.RemBertMaskedLMHead(
        vocabulary_size=backbone.vocabulary_size,
        output_embedding_dim=output_embedding_dim,
        hidden_act=backbone.hidden_act,
        layer_norm_epsilon=backbone.layer_norm_epsilon,
        initializer_range=backbone.initializer_range,
        dtype=backbone.dtype_policy, name="mlm_head")
    # === Functional model ===
    inputs = {**backbone.input,
              "mask_positions": keras.Input(shape=(None,), dtype="int32",
                                            name="mask_positions")}
    sequence_output = backbone(backbone.input)["sequence_output"]
    outputs = self.masked_lm_head(sequence_output, inputs["mask_positions"])
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    # === Config ===
    self.output_embedding_dim = output_embedding_dim

  def get_config(self):
    config = super().get_config()
    config.update(output_embedding_dim=self.output_embedding_dim)
    return config
