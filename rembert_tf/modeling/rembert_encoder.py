"""RemBertEncoder: the fine-tuning-side network with a factorised input embedding.

Builds on Model Garden's `official.nlp.modeling`: the layout of
`networks.BertEncoderV2` with `embedding_width` (E_in embeddings, E_in ->
hidden projection, post-LayerNorm blocks, tanh pooler) from the same layers,
but with the config's `layer_norm_eps`. The MLM head lives in
`RemBertPretrainer`, so an encoder checkpoint is what fine-tuning keeps.

Example:
<!-- snippet: not run: a fragment: `tf` comes from the caller's code -->
```python
from rembert_tf.modeling import rembert_config, rembert_encoder
cfg = rembert_config.load_model_config("tiny")
encoder = rembert_encoder.build_encoder(cfg)
outputs = encoder(dict(input_word_ids=tf.ones([2, 16], tf.int32),
                       input_mask=tf.ones([2, 16], tf.int32),
                       input_type_ids=tf.zeros([2, 16], tf.int32)))
outputs["sequence_output"].shape   # [2, 16, 128]
```
"""
from typing import Any, Dict, List, Optional

import tensorflow as tf
import tf_keras
from official.modeling import tf_utils
from official.nlp.modeling import layers

from rembert_tf.modeling import activations
from rembert_tf.modeling import fused_kernels
from rembert_tf.modeling import padding_removal
from rembert_tf.modeling import projection_dense
from rembert_tf.modeling import rembert_config
from rembert_tf.modeling import transformer_block


@tf_keras.utils.register_keras_serializable(package="rembert_tf")
class RemBertEncoder(tf_keras.layers.Layer):
  """Transformer encoder with decoupled, factorised input embeddings.

  Called on a dict of int32 `input_word_ids`, `input_mask`, `input_type_ids`
  [batch, seq]; returns `sequence_output` [batch, seq, hidden],
  `pooled_output` [batch, hidden] and `encoder_outputs` (every block's output).
  `output_range` and `remove_padding` change the computation, never the
  variables (see `build_encoder`).
  """

  def __init__(self,
               vocab_size: int,
               hidden_size: int = 1152,
               num_layers: int = 32,
               num_attention_heads: int = 18,
               inner_dim: int = 4608,
               input_embedding_size: int = 256,
               hidden_act: str = "gelu",
               output_dropout: float = 0.0,
               attention_dropout: float = 0.0,
               max_sequence_length: int = 512,
               type_vocab_size: int = 2,
               layer_norm_eps: float = 1e-12,
               initializer_range: float = 0.02,
               output_range: Optional[int] = None,
               remove_padding: bool = False,
               **kwargs):
    super().__init__(**kwargs)
    if output_range is not None and output_range < 1:
      raise ValueError(f"output_range must be None or >= 1, got "
                       f"{output_range}.")
    self._output_range = output_range
    self._remove_padding = remove_padding
    self._config = dict(
        vocab_size=vocab_size, hidden_size=hidden_size, num_layers=num_layers,
        num_attention_heads=num_attention_heads, inner_dim=inner_dim,
        input_embedding_size=input_embedding_size, hidden_act=hidden_act,
        output_dropout=output_dropout, attention_dropout=attention_dropout,
        max_sequence_length=max_sequence_length,
        type_vocab_size=type_vocab_size, layer_norm_eps=layer_norm_eps,
        initializer_range=initializer_range, output_range=output_range,
        remove_padding=remove_padding)
    # Attribute names and their order are the checkpoint's object graph and
    # the order of `variables`: checkpoints and the converters rely on both.
    initializer = tf_keras.initializers.TruncatedNormal(stddev=initializer_range)
    self._create_input_embedding(initializer)
    self._create_transformer_blocks()
    self._create_pooler(initializer)
    self.inputs = dict(
        input_word_ids=tf_keras.Input(shape=(None,), dtype=tf.int32),
        input_mask=tf_keras.Input(shape=(None,), dtype=tf.int32),
        input_type_ids=tf_keras.Input(shape=(None,), dtype=tf.int32))

  def _create_input_embedding(self, initializer) -> None:
    """Word, position and type embeddings (width E_in), their LayerNorm and
    dropout, and the E_in -> hidden projection."""
    c = self._config
    self._embedding_layer = layers.OnDeviceEmbedding(
        vocab_size=c["vocab_size"],
        embedding_width=c["input_embedding_size"],
        initializer=tf_utils.clone_initializer(initializer),
        name="word_embeddings")
    self._position_embedding_layer = layers.PositionEmbedding(
        max_length=c["max_sequence_length"],
        initializer=tf_utils.clone_initializer(initializer),
        name="position_embedding")
    # One-hot lookup for the 2-row type table: a matmul is faster than a
    # gather on TPU for tiny tables (Model Garden does the same).
    self._type_embedding_layer = layers.OnDeviceEmbedding(
        vocab_size=c["type_vocab_size"],
        embedding_width=c["input_embedding_size"],
        initializer=tf_utils.clone_initializer(initializer),
        use_one_hot=True,
        name="type_embeddings")
    # LayerNorm in float32 even under mixed_bfloat16, as in BertEncoderV2.
    self._embedding_norm_layer = tf_keras.layers.LayerNormalization(
        axis=-1, epsilon=c["layer_norm_eps"], dtype=tf.float32,
        name="embeddings/layer_norm")
    self._embedding_dropout = tf_keras.layers.Dropout(
        rate=c["output_dropout"], name="embedding_dropout")
    # The E_in -> hidden projection exists only when the widths differ.
    # Explicit [batch, seq, E_in] axes, not "...x,xy->...y": TF's gradient of
    # an ellipsis einsum materialises a [batch, seq, E_in, hidden] tensor.
    self._embedding_projection = None
    if c["input_embedding_size"] != c["hidden_size"]:
      self._embedding_projection = tf_keras.layers.EinsumDense(
          "abc,cd->abd",
          output_shape=(None, c["hidden_size"]),
          bias_axes="d",
          kernel_initializer=tf_utils.clone_initializer(initializer),
          name="embedding_projection")

  def _create_transformer_blocks(self) -> None:
    """The attention mask and the Transformer blocks (post-LayerNorm, BERT)."""
    c = self._config
    self._attention_mask_layer = layers.SelfAttentionMask(
        name="self_attention_mask")
    self._transformer_layers = [
        build_transformer_block(
            num_attention_heads=c["num_attention_heads"],
            inner_dim=c["inner_dim"], hidden_act=c["hidden_act"],
            output_dropout=c["output_dropout"],
            attention_dropout=c["attention_dropout"],
            layer_norm_eps=c["layer_norm_eps"],
            initializer_range=c["initializer_range"],
            name=f"transformer/layer_{i}")
        for i in range(c["num_layers"])
    ]

  def _create_pooler(self, initializer) -> None:
    """The tanh pooler on the first token."""
    self._pooler_layer = tf_keras.layers.Dense(
        units=self._config["hidden_size"],
        activation="tanh",
        kernel_initializer=tf_utils.clone_initializer(initializer),
        name="pooler_transform")

  def input_embedding_layers(self) -> List[tf_keras.layers.Layer]:
    """The layers up to the first Transformer block (what `--freeze_input_embeddings` freezes)."""
    return [layer for layer in (
        self._embedding_layer, self._position_embedding_layer,
        self._type_embedding_layer, self._embedding_norm_layer,
        self._embedding_projection) if layer is not None]

  def call(self, inputs: Dict[str, tf.Tensor], training=None,
           remove_padding: Optional[bool] = None):
    """The output dict (see the class docstring).

    remove_padding: overrides the constructor's setting for this call.
    """
    if not isinstance(inputs, dict):
      raise ValueError("RemBertEncoder takes a dict with input_word_ids, "
                       f"input_mask and input_type_ids, got {type(inputs)}.")
    word_ids = inputs["input_word_ids"]
    mask = inputs["input_mask"]
    type_ids = inputs["input_type_ids"]
    if remove_padding is None:
      remove_padding = self._remove_padding
    # Data-dependent shapes: never under XLA (jit_compile=True, TPU).
    layout = None
    if remove_padding and not padding_removal.in_xla_context():
      # Row counts in buckets for the training path's XLA-compiled kernels.
      layout = padding_removal.TokenLayout.from_mask(
          mask, bucketed=training is not None and training is not False)

    embeddings = self._embed(word_ids, type_ids, layout, training)
    # [batch, 1, seq]: which keys each example attends to, broadcast over
    # queries by the attention (no [batch, seq, seq] copy); from the mask
    # alone, as the embeddings may be packed.
    attention_mask = self._attention_mask_layer(
        tf.cast(mask, embeddings.dtype)[:, :1], mask)
    encoder_outputs = []
    x = embeddings
    last = len(self._transformer_layers) - 1
    for i, layer in enumerate(self._transformer_layers):
      # Only the arguments in use: any Model Garden block runs here too.
      options = {}
      if i == last and self._output_range is not None:
        options["output_range"] = self._output_range
      if layout is not None:
        options["layout"] = layout
      x = layer([x, attention_mask], training=training, **options)
      encoder_outputs.append(x)
    if layout is not None:  # zeros at padded positions
      encoder_outputs = [
          layout.unpack(x, real_only=True) if x.shape.rank == 2 else x
          for x in encoder_outputs]
    x = encoder_outputs[-1]
    pooled_output = self._pooler_layer(x[:, 0, :])
    return dict(sequence_output=x, pooled_output=pooled_output,
                encoder_outputs=encoder_outputs)

  def _embed(self, word_ids, type_ids, layout, training):
    """Input embeddings (width hidden): [batch, seq, hidden], or the packed
    [rows, hidden] rows of `layout`."""
    word_embeddings = self._embedding_layer(word_ids)
    other_embeddings = (self._position_embedding_layer(word_embeddings)
                        + self._type_embedding_layer(type_ids))
    if layout is not None:
      word_embeddings = layout.pack(word_embeddings)
      other_embeddings = layout.pack(other_embeddings)
    if training:
      return self._project_fused(self._dropout_fused(
          self._normalize_fused(word_embeddings, other_embeddings)))
    if layout is not None:  # the layers are built for [batch, seq, width]
      embeddings = self._embedding_norm_layer(
          (word_embeddings + other_embeddings)[tf.newaxis])[0]
    else:
      embeddings = self._embedding_norm_layer(word_embeddings + other_embeddings)
    embeddings = self._embedding_dropout(embeddings, training=training)
    if self._embedding_projection is not None:
      if layout is not None:
        embeddings = self._embedding_projection(embeddings[tf.newaxis])[0]
      else:
        embeddings = self._embedding_projection(embeddings)
    return embeddings

  def _normalize_fused(self, word_embeddings, other_embeddings):
    """Training: the sum and its LayerNorm as one fused kernel (the same
    arithmetic as the LayerNorm layer, whose variables it uses)."""
    norm = self._embedding_norm_layer
    if not norm.built:  # builds it (variables named as usual); result unused
      total = word_embeddings + other_embeddings
      norm(total if total.shape.rank == 3 else total[tf.newaxis])
    width = word_embeddings.shape[-1]
    normalized = fused_kernels.add_layer_norm(
        tf.reshape(word_embeddings, [-1, width]),
        tf.reshape(other_embeddings, [-1, width]),
        norm.gamma, norm.beta, norm.epsilon)
    return tf.reshape(normalized, tf.shape(word_embeddings))

  def _dropout_fused(self, embeddings):
    """Training: the embedding dropout as one compiled kernel each way."""
    rate = self._embedding_dropout.rate
    seed = fused_kernels.dropout_seed(rate)
    return fused_kernels.dropout(embeddings, seed, rate)

  def _project_fused(self, embeddings):
    """Training: the E_in -> hidden projection as MatMul + BiasAdd on [rows,
    E_in] rows with the EinsumDense layer's variables (see projection_dense)."""
    projection = self._embedding_projection
    if projection is None:
      return embeddings
    if not projection.built:  # builds it (variables named as usual)
      projection(embeddings if embeddings.shape.rank == 3
                 else embeddings[tf.newaxis])
    dtype = projection.compute_dtype
    return projection_dense.project_rows(
        tf.cast(embeddings, dtype), tf.cast(projection.kernel, dtype),
        tf.cast(projection.bias, dtype))

  # Same accessors as Model Garden's BertEncoderV2, so its heads and tasks work.
  def get_embedding_table(self):
    return self._embedding_layer.embeddings

  def get_embedding_layer(self):
    return self._embedding_layer

  @property
  def transformer_layers(self):
    return self._transformer_layers

  @property
  def pooler_layer(self):
    return self._pooler_layer

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update(self._config)
    return config


def build_transformer_block(num_attention_heads, inner_dim, hidden_act,
                            output_dropout, attention_dropout, layer_norm_eps,
                            initializer_range, name):
  """One post-LayerNorm BERT block: Model Garden's TransformerEncoderBlock
  computed with MatMuls (`RemBertTransformerBlock`; same variables)."""
  return transformer_block.RemBertTransformerBlock(
      num_attention_heads=num_attention_heads,
      inner_dim=inner_dim,
      inner_activation=activations.get(hidden_act),
      output_dropout=output_dropout,
      attention_dropout=attention_dropout,
      norm_first=False,
      norm_epsilon=layer_norm_eps,
      kernel_initializer=tf_keras.initializers.TruncatedNormal(
          stddev=initializer_range),
      name=name)


def build_encoder(cfg: rembert_config.RemBertConfig,
                  name: str = "encoder",
                  output_range: Optional[int] = None,
                  remove_padding: bool = False) -> RemBertEncoder:
  """Builds (and creates the variables of) the encoder for a model config.

  output_range: the last block computes the first `output_range` positions
    only (1: the [CLS] position a classifier pools).
  remove_padding: run the row-wise work on the real tokens only when not
    under XLA (padding_removal.py); padded positions of the outputs are zeros.
  """
  encoder = RemBertEncoder(
      vocab_size=cfg.vocab_size,
      hidden_size=cfg.hidden_size,
      num_layers=cfg.num_hidden_layers,
      num_attention_heads=cfg.num_attention_heads,
      inner_dim=cfg.intermediate_size,
      input_embedding_size=cfg.input_embedding_size,
      hidden_act=cfg.hidden_act,
      output_dropout=cfg.hidden_dropout_prob,
      attention_dropout=cfg.attention_probs_dropout_prob,
      max_sequence_length=cfg.max_position_embeddings,
      type_vocab_size=cfg.type_vocab_size,
      layer_norm_eps=cfg.layer_norm_eps,
      initializer_range=cfg.initializer_range,
      output_range=output_range,
      remove_padding=remove_padding,
      name=name)
  encoder(dummy_inputs())
  return encoder


def dummy_inputs(batch_size: int = 1, seq_length: int = 2):
  """Integer inputs of the encoder's signature, to build variables."""
  ids = tf.zeros([batch_size, seq_length], tf.int32)
  return dict(input_word_ids=ids, input_mask=tf.ones_like(ids),
              input_type_ids=ids)
