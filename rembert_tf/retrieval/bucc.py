"""BUCC 2018 bitext mining: ratio-margin scores over 4 neighbours both ways, a threshold from the sample set.

XTREME's BUCC baseline (LASER's margin-based mining): the ratio margin of a
pair is cos(x, y) / ((mean_x + mean_y) / 2) over each side's k = 4 nearest
neighbours; each sentence's best pair, forward and backward, is kept while
neither sentence is paired; the threshold is the best-F1 one on the sample
set ("dev"), and test candidates at or above it are the predictions.
"""
import collections
from typing import Dict, FrozenSet, List, Sequence, Tuple

import numpy as np

from rembert_tf.evaluation import xtreme_metrics
from rembert_tf.retrieval import bitext
from rembert_tf.retrieval import nearest_neighbors

NEIGHBORS = 4
Pair = Tuple[str, str]


def sentence_to_id(ids: Sequence[str], sentences: Sequence[str]
                   ) -> Dict[str, str]:
  """sentence -> id; sentences that appear more than once are left out."""
  counts = collections.Counter(sentences)
  return {s: i for i, s in zip(ids, sentences) if counts[s] == 1}


def _margins(similarities, neighbors, own_mean, other_mean) -> np.ndarray:
  return similarities / ((own_mean[:, None] + other_mean[neighbors]) / 2)


def mine(source_embeddings: np.ndarray, target_embeddings: np.ndarray,
         strategy, k: int = NEIGHBORS) -> List[Tuple[int, int, float]]:
  """(source row, target row, margin) pairs, best first."""
  forward, forward_rows = nearest_neighbors.top_k(
      source_embeddings, target_embeddings, k, strategy)
  backward, backward_rows = nearest_neighbors.top_k(
      target_embeddings, source_embeddings, k, strategy)
  forward_mean, backward_mean = forward.mean(axis=1), backward.mean(axis=1)
  forward_margin = _margins(forward, forward_rows, forward_mean, backward_mean)
  backward_margin = _margins(backward, backward_rows, backward_mean,
                             forward_mean)
  num_source, num_target = len(source_embeddings), len(target_embeddings)
  sources = np.concatenate([np.arange(num_source), backward_rows[
      np.arange(num_target), backward_margin.argmax(axis=1)]])
  targets = np.concatenate([forward_rows[
      np.arange(num_source), forward_margin.argmax(axis=1)],
                            np.arange(num_target)])
  margins = np.concatenate([forward_margin.max(axis=1),
                            backward_margin.max(axis=1)])
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
