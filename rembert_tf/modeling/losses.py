"""The global-batch weighted mean loss that pre-training and fine-tuning share.

Each replica divides its weighted sum by the all-reduced weight of the whole
batch, so the shares add up to the global batch's loss even when replicas
hold unequal numbers of real items.
"""
from typing import Optional, Sequence

import tensorflow as tf


def global_batch_mean(per_item_loss: tf.Tensor, weights: tf.Tensor,
                      global_weight: Optional[tf.Tensor] = None,
                      aux_losses: Optional[Sequence[tf.Tensor]] = None
                      ) -> tf.Tensor:
  """This replica's share of the global batch's weighted mean loss (float32).

  Args:
    per_item_loss: losses of this replica's items (any shape).
    weights: their weights (same shape; 0 for padding).
    global_weight: the all-reduced sum of `weights` over the global batch;
      None: this replica's own sum (a single device).
    aux_losses: regularisation losses, split evenly over the replicas.
  """
  if global_weight is None:
    global_weight = tf.reduce_sum(weights)
  loss = tf.math.divide_no_nan(tf.reduce_sum(per_item_loss * weights),
                               global_weight)
  if aux_losses:
    num_replicas = tf.distribute.get_strategy().num_replicas_in_sync
    loss += tf.add_n([tf.cast(l, tf.float32) for l in aux_losses]) / num_replicas
  return loss
