"""Deterministic synthetic pre-training batches (`input_path: synthetic`).

For the step benchmark and smoke tests that must not depend on records. Like
Model Garden's `input_path: dummy` in `official.nlp.tasks.masked_lm`, but the
batches vary (stateless random from `seed` and the example index), have the
record layout's static shapes, and carry a learnable signal: the target at a
masked position is the unmasked token, and tokens repeat within a sequence.

Example:
<!-- snippet: not run: a fragment: `data_config` comes from the caller's code -->
```python
from rembert_tf.pretraining import synthetic_data
ds = synthetic_data.synthetic_dataset(data_config, vocab_size=2000)
batch = next(iter(ds))      # dict of [per-replica batch, ...] tensors
```
"""
import tensorflow as tf

SYNTHETIC_INPUT_PATH = "synthetic"
_FIRST_ORDINARY_ID = 5  # ids 0..4 are <pad> <unk> [CLS] [SEP] [MASK]
_MASK_ID = 4


def synthetic_example(index, seq_length: int, max_predictions: int,
                      vocab_size: int, seed: int):
  """One example: [CLS] w... [SEP] <pad>..., P masked positions."""
  index = tf.cast(index, tf.int32)
  key = tf.stack([tf.constant(seed, tf.int32), index])
  length = tf.random.stateless_uniform(
      [], key, minval=max(max_predictions + 3, seq_length // 2),
      maxval=seq_length + 1, dtype=tf.int32)
  # A small per-sequence "topic" vocabulary makes the task learnable.
  # Zipf-like ids: frequent tokens make a unigram signal early on.
  u = tf.random.stateless_uniform([8], key + 1)
  topic = _FIRST_ORDINARY_ID + tf.cast(
      tf.floor((vocab_size - _FIRST_ORDINARY_ID) * u ** 4), tf.int32)
  picks = tf.random.stateless_uniform([seq_length], key + 2, minval=0,
                                      maxval=8, dtype=tf.int32)
  words = tf.gather(topic, picks)
  positions_all = tf.range(seq_length)
  words = tf.where(positions_all == 0, 2, words)                 # [CLS]
  words = tf.where(positions_all == length - 1, 3, words)        # [SEP]
  words = tf.where(positions_all >= length, 0, words)            # <pad>
  mask = tf.cast(positions_all < length, tf.int32)
  # P distinct positions among 1 .. length-2; a random number of them real.
  scores = tf.random.stateless_uniform([seq_length], key + 3)
  maskable = tf.logical_and(positions_all >= 1, positions_all <= length - 2)
  scores = tf.where(maskable, scores, -1.0)
  positions = tf.math.top_k(scores, k=max_predictions).indices
  num_real = tf.random.stateless_uniform(
      [], key + 4, minval=1, maxval=max_predictions + 1, dtype=tf.int32)
  weights = tf.cast(tf.range(max_predictions) < num_real, tf.float32)
  positions = tf.where(weights > 0, positions, 0)
  targets = tf.gather(words, positions)
  targets = tf.where(weights > 0, targets, 0)
  masked_input = tf.tensor_scatter_nd_update(
      words, positions[:, None],
      tf.where(weights > 0, _MASK_ID, tf.gather(words, positions)))
  return dict(
      input_word_ids=masked_input,
      input_mask=mask,
      input_type_ids=tf.zeros([seq_length], tf.int32),
      masked_lm_positions=positions,
      masked_lm_ids=targets,
      masked_lm_weights=weights)


def synthetic_dataset(params, vocab_size: int, input_context=None,
                      num_examples: int = 4096) -> tf.data.Dataset:
  """Batches of synthetic examples with static shapes (per-replica batch).

  Training data repeats forever; evaluation data is `num_examples` long.
  """
  batch_size = params.global_batch_size
  if input_context:
    batch_size = input_context.get_per_replica_batch_size(batch_size)
  seed = params.seed if params.seed is not None else 1234
  indices = tf.data.Dataset.range(num_examples)
  if input_context and input_context.num_input_pipelines > 1:
    indices = indices.shard(input_context.num_input_pipelines,
                            input_context.input_pipeline_id)
  if params.is_training:
    indices = indices.repeat()
  dataset = indices.map(
      lambda i: synthetic_example(i, params.seq_length,
                                  params.max_predictions_per_seq, vocab_size,
                                  seed),
      num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  dataset = dataset.batch(batch_size, drop_remainder=True)
  return dataset.prefetch(tf.data.AUTOTUNE)
