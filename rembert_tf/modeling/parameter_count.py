"""#PT and #FT parameter counts, from built Keras models and in closed form.

#PT is everything pre-training trains, #FT what fine-tuning keeps. The
paper's #FT excludes the pooler and its #PT includes it, so the pooler is
reported separately and both paper figures are reproduced.
"""
import dataclasses

from rembert_tf.modeling import rembert_config


@dataclasses.dataclass(frozen=True)
class ParameterCounts:
  pt_params: int        # everything trained in pre-training, pooler included
  ft_params: int        # encoder embeddings + Transformer blocks, no pooler
  pooler_params: int    # the encoder's tanh pooler
  output_side_params: int  # output embedding, MLM head, extra output layers

  @property
  def encoder_params(self) -> int:
    return self.ft_params + self.pooler_params


def _unique_size(variables) -> int:
  seen, total = set(), 0
  for v in variables:
    if id(v) not in seen:
      seen.add(id(v))
      total += int(v.shape.num_elements())
  return total


def count_parameters(cfg: rembert_config.RemBertConfig) -> ParameterCounts:
  """Counts from the built pretrainer. Builds in a throwaway graph, so no
  weights are initialised (the released size needs no 4 GB of memory)."""
  # Imported here: the closed form alone (rembert-param-table) needs neither.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import rembert_pretrainer  # pylint: disable=g-import-not-at-top
  with tf.Graph().as_default():
    model = rembert_pretrainer.build_pretrainer(cfg)
    encoder = model.encoder
    pooler = _unique_size(encoder.pooler_layer.trainable_variables)
    encoder_total = _unique_size(encoder.trainable_variables)
    total = _unique_size(model.trainable_variables)
    return ParameterCounts(
        pt_params=total, ft_params=encoder_total - pooler,
        pooler_params=pooler, output_side_params=total - encoder_total)


def closed_form_counts(cfg: rembert_config.RemBertConfig) -> ParameterCounts:
  """The same counts from the architecture's formula, without building a
  model (tests compare it with `count_parameters` on built models)."""
  h, e_in, e_out = cfg.hidden_size, cfg.input_embedding_size, cfg.output_embedding_size
  ffn, v = cfg.intermediate_size, cfg.vocab_size
  embeddings = (v + cfg.max_position_embeddings + cfg.type_vocab_size) * e_in
  embeddings += 2 * e_in                                   # LayerNorm(E_in)
  if e_in != h:
    embeddings += e_in * h + h                             # projection + bias
  block = 4 * (h * h + h) + 2 * h + (h * ffn + ffn) + (ffn * h + h) + 2 * h
  ft = embeddings + cfg.num_hidden_layers * block
  pooler = h * h + h
  head = h * e_out + e_out + 2 * e_out + v                 # dense, LN, bias
  if not cfg.coupled:
    head += v * e_out                                      # own output embedding
  output_side = head + cfg.num_output_layers * block
  return ParameterCounts(pt_params=ft + pooler + output_side, ft_params=ft,
                         pooler_params=pooler, output_side_params=output_side)


def millions(n: int) -> str:
  """Whole millions from 100M up (the paper's rounding: 995M), three
  significant digits below, where whole millions say little (1.11M, 0.541M)."""
  return f"{round(n / 1e6)}M" if n >= 100_000_000 else f"{n / 1e6:.3g}M"
