"""RemBertPretrainer: encoder + output side (extra output layers, MLM head).

Builds on Model Garden's `models.BertPretrainerV2` through its
`customized_masked_lm` hook. Every output-side variable lives outside
`encoder`, so `checkpoint_items` gives the encoder alone.

Example:
<!-- snippet: not run: a fragment: `ids` comes from the caller's code -->
```python
from rembert_tf.modeling import rembert_config, rembert_pretrainer
cfg = rembert_config.load_model_config("tiny")
model = rembert_pretrainer.build_pretrainer(cfg)
outputs = model(dict(input_word_ids=ids, input_mask=mask, input_type_ids=types,
                     masked_lm_positions=positions))
outputs["mlm_logits"].shape   # [batch, num_predictions, cfg.vocab_size]
```
"""
from typing import Dict, List

import tensorflow as tf
import tf_keras
from official.nlp.modeling import layers
from official.nlp.modeling import models

from rembert_tf.modeling import decoupled_masked_lm
from rembert_tf.modeling import rembert_config
from rembert_tf.modeling import rembert_encoder


class RemBertPretrainer(models.BertPretrainerV2):
  """The pre-training model; `encoder` is what fine-tuning keeps."""

  def __init__(self,
               encoder: rembert_encoder.RemBertEncoder,
               masked_lm: decoupled_masked_lm.DecoupledMaskedLM,
               output_layers: List[tf_keras.layers.Layer] = (),
               name: str = "rembert_pretrainer",
               **kwargs):
    super().__init__(encoder_network=encoder, customized_masked_lm=masked_lm,
                     name=name, **kwargs)
    self.output_layers = list(output_layers)
    self._attention_mask_layer = layers.SelfAttentionMask(
        name="output_self_attention_mask")

  @property
  def encoder(self) -> rembert_encoder.RemBertEncoder:
    return self.encoder_network

  def call(self, inputs: Dict[str, tf.Tensor], training=None):
    outputs = dict(self.encoder_network(inputs, training=training))
    if "masked_lm_positions" in inputs:
      x = outputs["sequence_output"]
      if self.output_layers:
        mask = self._attention_mask_layer(x, inputs["input_mask"])
        for layer in self.output_layers:
          x = layer([x, mask], training=training)
      outputs["mlm_logits"] = self.masked_lm(
          x, masked_positions=inputs["masked_lm_positions"])
    return outputs

  @property
  def checkpoint_items(self):
    """Objects a checkpoint stores besides the model: the encoder on its own."""
    return dict(encoder=self.encoder_network)

  def output_side_variables(self) -> List[tf.Variable]:
    """Variables discarded after pre-training (not shared with the encoder)."""
    encoder_ids = {id(v) for v in self.encoder_network.variables}
    return [v for v in self.variables if id(v) not in encoder_ids]


def build_pretrainer(cfg: rembert_config.RemBertConfig) -> RemBertPretrainer:
  """Builds the pre-training model of a config, variables created."""
  cfg.validate()
  encoder = rembert_encoder.build_encoder(cfg)
  masked_lm = decoupled_masked_lm.DecoupledMaskedLM(
      vocab_size=cfg.vocab_size,
      output_embedding_size=cfg.output_embedding_size,
      hidden_act=cfg.hidden_act,
      initializer_range=cfg.initializer_range,
      layer_norm_eps=cfg.layer_norm_eps,
      embedding_table=encoder.get_embedding_table() if cfg.coupled else None,
      name="cls/predictions")
  output_layers = [
      rembert_encoder.build_transformer_block(
          num_attention_heads=cfg.num_attention_heads,
          inner_dim=cfg.intermediate_size, hidden_act=cfg.hidden_act,
          output_dropout=cfg.hidden_dropout_prob,
          attention_dropout=cfg.attention_probs_dropout_prob,
          layer_norm_eps=cfg.layer_norm_eps,
          initializer_range=cfg.initializer_range,
          name=f"output_transformer/layer_{i}")
      for i in range(cfg.num_output_layers)
  ]
  model = RemBertPretrainer(encoder, masked_lm, output_layers)
  inputs = rembert_encoder.dummy_inputs()
  inputs["masked_lm_positions"] = tf.zeros([1, 1], tf.int32)
  model(inputs)
  return model
