"""Sentence embeddings from one layer of a RemBERT encoder: mean-pooled hidden states, L2-normalised.

As XTREME's retrieval baselines: `[CLS] pieces [SEP]` through the blocks up
to the chosen one (`default_layer`: XTREME's middle-layer rule), its hidden
states averaged over real tokens; sentences go in length buckets of static
shape (`bucket_lengths`) over the replicas (`replica_batches`).

Example:
<!-- snippet: not run: needs a checkpoint directory; `strategy` comes from the caller's code -->
```python
from rembert_tf.retrieval import sentence_embedder
embedder = sentence_embedder.SentenceEmbedder("runs/pretrain", strategy)  # default layer
vectors = embedder.embed(["Hello world.", "Hallo Welt."])   # [2, hidden], unit length
float(vectors[0] @ vectors[1])                                # the cosine
```
"""
from typing import List, Optional, Sequence

import numpy as np
import tensorflow as tf

from rembert_tf.common import errors
from rembert_tf.common import progress
from rembert_tf.data import tokenizer
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.checkpoints import checkpoint_restore
from rembert_tf.modeling import rembert_encoder
from rembert_tf.retrieval import replica_batches

DEFAULT_SEQ_LENGTH = 128
# Sentences per replica and step at full length (fine-tuning's prediction batch).
BATCH_SIZE_PER_REPLICA = 32


def default_layer(num_layers: int) -> int:
  """XTREME's retrieval layer for any depth: 8 of 12, 14 of 24, 18 of 32."""
  return min(num_layers, num_layers // 2 + 2)


def resolve_layer(layer: Optional[int], num_layers: int, where: str) -> int:
  """`layer` as 1..num_layers (None: the default; -1: the last block)."""
  if layer is None:
    return default_layer(num_layers)
  resolved = layer + num_layers + 1 if layer < 0 else layer
  if not 1 <= resolved <= num_layers:
    raise errors.UsageError(
        f"--layer {layer}: the encoder of {where} has {num_layers} layers; "
        f"choose 1..{num_layers} (or -1 for the last).")
  return resolved


def bucket_lengths(seq_length: int) -> List[int]:
  """16, 24, 32, 48, 64, 96, ... below seq_length, then seq_length."""
  lengths, power = [], 16
  while power < seq_length:
    lengths += [l for l in (power, power * 3 // 2) if l < seq_length]
    power *= 2
  return lengths + [seq_length]


def _mean_pooled(encoder):
  """inputs -> {"embedding": unit-length mean of the last block over real tokens}."""
  def embed(inputs):
    ids, mask = inputs["input_word_ids"], inputs["input_mask"]
    outputs = encoder(dict(input_word_ids=ids, input_mask=mask,
                           input_type_ids=tf.zeros_like(ids)), training=False)
    hidden = tf.cast(outputs["encoder_outputs"][-1], tf.float32)
    weights = tf.cast(mask, tf.float32)[..., tf.newaxis]
    pooled = (tf.reduce_sum(hidden * weights, axis=1)
              / tf.maximum(tf.reduce_sum(weights, axis=1), 1.0))
    return {"embedding": tf.math.l2_normalize(pooled, axis=-1)}
  return embed


class SentenceEmbedder:
  """Embeds sentences with the first `layer` blocks of a checkpoint's encoder.

  `source` is any checkpoint source (`checkpoint_layout.resolve`); `layer`,
  `seq_length` and `batch_size` default as `rembert-retrieve`'s flags do.
  """

  def __init__(self, source, strategy, layer: Optional[int] = None,
               model_config=None, sp_model=None,
               seq_length: Optional[int] = None,
               batch_size: Optional[int] = None, jit_compile: bool = False):
    sp_model = sp_model or checkpoint_layout.find_sentencepiece(source)
    if not sp_model:
      raise errors.UsageError(
          f"{source}: no sentencepiece.model with the checkpoint; pass the "
          "SentencePiece model it was trained with (--sentencepiece_model).")
    cfg = checkpoint_restore.model_config_of(source, model_config)
    # What the embeddings are: block `layer` of a `num_layers`-block encoder.
    self.layer = resolve_layer(layer, cfg.num_hidden_layers, str(source))
    self.num_layers, self.source = cfg.num_hidden_layers, str(source)
    if seq_length is None:  # (0 is refused below, not taken as unset)
      seq_length = min(DEFAULT_SEQ_LENGTH, cfg.max_position_embeddings)
    if not 3 <= seq_length <= cfg.max_position_embeddings:
      raise errors.UsageError(
          f"--seq_length {seq_length}: choose 3..{cfg.max_position_embeddings}"
          f" (the encoder's max_position_embeddings).")
    self.seq_length, self._hidden_size = seq_length, cfg.hidden_size
    with strategy.scope(), checkpoint_restore.zero_initialized_variables():
      self.encoder = rembert_encoder.build_encoder(  # blocks 1..layer alone
          cfg.replace(num_hidden_layers=self.layer), remove_padding=True)
    checkpoint_restore.restore_encoder(self.encoder, source)
    self._strategy = strategy
    self._tokenizer = tokenizer.SentencePieceTokenizer(sp_model)
    self._special = self._tokenizer.special
    self._batch_size = batch_size or (
        BATCH_SIZE_PER_REPLICA * strategy.num_replicas_in_sync)
    self._step = replica_batches.distributed_step(
        strategy, _mean_pooled(self.encoder), jit_compile=jit_compile)

  def tokenize(self, sentences: Sequence[str]) -> List[List[int]]:
    """`[CLS] pieces [SEP]` ids per sentence, truncated to seq_length."""
    return self._tokenizer.sentence_ids(sentences, self.seq_length)

  def embed_tokenized(self, token_ids: Sequence[Sequence[int]],
                      description: Optional[str] = None) -> np.ndarray:
    """[sentences, hidden] float32 unit vectors, in input order."""
    lengths = np.array([len(t) for t in token_ids], np.int64)
    buckets = bucket_lengths(self.seq_length)
    bucket_of = np.searchsorted(buckets, lengths)
    replicas = self._strategy.num_replicas_in_sync
    embeddings = np.zeros([len(token_ids), self._hidden_size], np.float32)
    with progress.Progress(description or "embedding", total=len(token_ids),
                           unit="sentences") as bar:
      for b, length in enumerate(buckets):
        rows = np.flatnonzero(bucket_of == b)
        if not len(rows):
          continue
        ids = np.full([len(rows), length], self._special.pad_id, np.int32)
        for i, row in enumerate(rows):
          ids[i, :lengths[row]] = token_ids[row]
        mask = (np.arange(length) < lengths[rows, None]).astype(np.int32)
        # About batch_size x seq_length tokens per step in every bucket.
        batch = max(replicas, self._batch_size * self.seq_length // length)
        embeddings[rows] = replica_batches.map_batches(
            self._strategy, self._step,
            {"input_word_ids": ids, "input_mask": mask},
            batch - batch % replicas, on_batch=bar.update)["embedding"]
    return embeddings

  def embed(self, sentences: Sequence[str],
            description: Optional[str] = None) -> np.ndarray:
    """[sentences, hidden] float32 unit vectors of `sentences`, in order."""
    return self.embed_tokenized(self.tokenize(sentences), description)
