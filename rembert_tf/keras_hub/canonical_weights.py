"""The canonical (TF1 RemBERT) name of every weight of RemBertBackbone and RemBertMaskedLMHead.

For the preset writer and the Hugging Face converter. Attention kernels keep
keras-hub's per-head shapes, to which a canonical [in, out] matrix reshapes.
"""
from typing import List, Tuple


def _layer_variables(prefix: str, layer) -> List[Tuple[str, object]]:
  if hasattr(layer, "gamma"):
    return [(prefix + "/gamma", layer.gamma), (prefix + "/beta", layer.beta)]
  return [(prefix + "/kernel", layer.kernel), (prefix + "/bias", layer.bias)]


def _block_variables(prefix: str, block) -> List[Tuple[str, object]]:
  """(canonical name, Keras variable) of keras-hub's TransformerEncoder."""
  attention = block._self_attention_layer  # pylint: disable=protected-access
  pairs = []
  for name, layer in (
      ("attention/self/query", attention.query_dense),
      ("attention/self/key", attention.key_dense),
      ("attention/self/value", attention.value_dense),
      ("attention/output/dense", attention.output_dense),
      ("attention/output/LayerNorm", block._self_attention_layer_norm),  # pylint: disable=protected-access
      ("intermediate/dense", block._feedforward_intermediate_dense),  # pylint: disable=protected-access
      ("output/dense", block._feedforward_output_dense),  # pylint: disable=protected-access
      ("output/LayerNorm", block._feedforward_layer_norm)):  # pylint: disable=protected-access
    pairs += _layer_variables(f"{prefix}/{name}", layer)
  return pairs


def canonical_variables(backbone, head=None) -> List[Tuple[str, object]]:
  """(canonical name, Keras variable) of a RemBertBackbone [+ its MLM head]."""
  pairs = [
      ("bert/embeddings/word_embeddings", backbone.token_embedding.embeddings),
      ("bert/embeddings/position_embeddings",
       backbone.position_embedding.position_embeddings),
      ("bert/embeddings/token_type_embeddings",
       backbone.segment_embedding.embeddings)]
  pairs += _layer_variables("bert/embeddings/LayerNorm",
                            backbone.embeddings_layer_norm)
  if backbone.embeddings_projection is not None:
    pairs += _layer_variables("bert/encoder/embedding_hidden_mapping_in",
                              backbone.embeddings_projection)
  for i, block in enumerate(backbone.transformer_layers):
    pairs += _block_variables(f"bert/encoder/layer_{i}", block)
  pairs += _layer_variables("bert/pooler/dense", backbone.pooled_dense)
  if head is not None:
    pairs += _layer_variables("cls/predictions/transform/dense",
                              head.transform_dense)
    pairs += _layer_variables("cls/predictions/transform/LayerNorm",
                              head.transform_layer_norm)
    pairs += [("cls/predictions/output_embedding", head.output_embedding),
              ("cls/predictions/output_bias", head.output_bias)]
  return pairs
