"""From embeddings to retrieved pairs: exact nearest neighbours on the devices, BUCC 2018's margin-based mining.

`top_k` is XTREME's exhaustive search (faiss's IndexFlatIP) where the encoder
runs: the database a variable on each replica, each batch of queries a matmul
and `tf.math.top_k` (ties to the lower index). BUCC mining is XTREME's
(LASER's): a pair's ratio margin is cos(x, y) / ((mean_x + mean_y) / 2) over
each side's k = 4 nearest neighbours; each sentence's best pair, both ways,
is kept while neither sentence is paired; test candidates at or above the
sample set's best-F1 threshold are the predictions.

Example:
```python
import numpy as np, tensorflow as tf
from rembert_tf.retrieval import mining
strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
x = np.eye(3, dtype=np.float32)
similarities, rows = mining.top_k(x[[2, 0]], x, 1, strategy)   # rows [[2], [0]]
```
"""
import collections
from typing import Dict, FrozenSet, List, Sequence, Tuple

import numpy as np
import tensorflow as tf

from rembert_tf.evaluation import xtreme_metrics
from rembert_tf.retrieval import bitext
from rembert_tf.retrieval import replica_batches

NEIGHBORS = 4  # BUCC's k
Pair = Tuple[str, str]
# The [queries, database] similarities of one replica's batch stay under this.
BLOCK_BYTES = 1 << 28


def top_k(queries: np.ndarray, database: np.ndarray, k: int, strategy
          ) -> Tuple[np.ndarray, np.ndarray]:
  """([queries, k] similarities, [queries, k] database rows), best first; k is
  capped at the database size."""
  k = min(k, len(database))
  with strategy.scope():
    rows = tf.Variable(np.asarray(database, np.float32), trainable=False,
                       name="neighbor_database")

  def search(inputs):
    top = tf.math.top_k(tf.matmul(inputs["queries"], rows, transpose_b=True),
                        k=k)
    return {"similarities": top.values, "indices": top.indices}
  # 8..1024 queries per replica, a multiple of 8.
  per_replica = min(1024, max(8, BLOCK_BYTES // (4 * len(database)) // 8 * 8))
  out = replica_batches.map_batches(
      strategy, replica_batches.distributed_step(strategy, search),
      {"queries": np.asarray(queries, np.float32)},
      per_replica * strategy.num_replicas_in_sync)
  return out["similarities"], out["indices"].astype(np.int64)


def sentence_to_id(ids: Sequence[str], sentences: Sequence[str]
                   ) -> Dict[str, str]:
  """sentence -> id; sentences that appear more than once are left out."""
  counts = collections.Counter(sentences)
  return {s: i for i, s in zip(ids, sentences) if counts[s] == 1}


def _best(similarities, rows, own_mean, other_mean):
  """(row, ratio margin) of each query's best neighbour."""
  margins = similarities / ((own_mean[:, None] + other_mean[rows]) / 2)
  best = margins.argmax(axis=1)[:, None]
  return np.take_along_axis(rows, best, 1)[:, 0], margins.max(axis=1)


def mine(source_embeddings: np.ndarray, target_embeddings: np.ndarray,
         strategy, k: int = NEIGHBORS) -> List[Tuple[int, int, float]]:
  """(source row, target row, margin) pairs, best first."""
  forward, forward_rows = top_k(
      source_embeddings, target_embeddings, k, strategy)
  backward, backward_rows = top_k(
      target_embeddings, source_embeddings, k, strategy)
  forward_mean, backward_mean = forward.mean(axis=1), backward.mean(axis=1)
  best_targets, forward_margins = _best(forward, forward_rows, forward_mean,
                                        backward_mean)
  best_sources, backward_margins = _best(backward, backward_rows,
                                         backward_mean, forward_mean)
  sources = np.concatenate([np.arange(len(source_embeddings)), best_sources])
  targets = np.concatenate([best_targets, np.arange(len(target_embeddings))])
  margins = np.concatenate([forward_margins, backward_margins])
  pairs, used_sources, used_targets = [], set(), set()
  for i in np.argsort(-margins, kind="stable"):
    source, target = int(sources[i]), int(targets[i])
    if source in used_sources or target in used_targets:
      continue
    used_sources.add(source)
    used_targets.add(target)
    if margins[i] > 0:
      pairs.append((source, target, float(margins[i])))
  return pairs


def candidates(data: bitext.Bitext, embed, strategy,
               k: int = NEIGHBORS) -> Dict[Pair, float]:
  """(source id, English id) -> margin for one split; `embed(sentences,
  description)` returns their unit-length embeddings."""
  # The distinct sentences, in order of first appearance.
  sources = list(dict.fromkeys(data.source_sentences))
  targets = list(dict.fromkeys(data.target_sentences))
  where = f"{data.task} {data.split} {data.language}"
  mined = mine(embed(sources, f"{where}: embedding {data.language}"),
               embed(targets, f"{where}: embedding en"), strategy, k)
  source_ids = sentence_to_id(data.source_ids, data.source_sentences)
  target_ids = sentence_to_id(data.target_ids, data.target_sentences)
  scores: Dict[Pair, float] = {}
  for source, target, margin in mined:
    pair = (source_ids.get(sources[source]), target_ids.get(targets[target]))
    if None not in pair:
      scores[pair] = max(margin, scores.get(pair, margin))
  return scores


def choose_threshold(scores: Dict[Pair, float], gold: FrozenSet[Pair]
                     ) -> Tuple[float, Dict[str, float]]:
  """(threshold, {f1, precision, recall} of the sample set there); 0 with no
  correct candidate, as in XTREME."""
  ranked = sorted(scores.items(), key=lambda item: -item[1])
  threshold, best_f1, correct = 0.0, 0.0, 0
  for i, (pair, margin) in enumerate(ranked):
    correct += pair in gold
    if not correct:
      continue
    precision, recall = correct / (i + 1), correct / len(gold)
    f1 = 2 * precision * recall / (precision + recall)
    if f1 > best_f1:
      best_f1 = f1
      following = ranked[i + 1][1] if i + 1 < len(ranked) else margin
      threshold = (margin + following) / 2
  chosen = xtreme_metrics.pair_f1(gold, extract(scores, threshold))
  return threshold, chosen


def extract(scores: Dict[Pair, float], threshold: float) -> List[Pair]:
  """Pairs whose margin is at least `threshold`, best first."""
  return [pair for pair, margin in
          sorted(scores.items(), key=lambda item: (-item[1], item[0]))
          if margin >= threshold]


def pair_lines(pairs) -> str:
  """`<source id><TAB><English id>` lines: the predictions' and labels' format."""
  return "".join(f"{source}\t{target}\n" for source, target in pairs)
