"""BUCC mining and the threshold: hand-computed cases and a direct re-computation."""
import math

import numpy as np
import pytest
import tensorflow as tf

from rembert_tf.retrieval import bitext
from rembert_tf.retrieval import mining


@pytest.fixture(scope="module")
def one_device():
  return tf.distribute.OneDeviceStrategy("/cpu:0")


def _unit(rows):
  rows = np.asarray(rows, np.float32)
  return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_margin_mining_hand_computed(one_device):
  # x0 = e0, x1 = e1; y0 = e0, y1 = e1, y2 halfway. With k = 2:
  # forward means (1 + .7071) / 2 for both x; backward means .5, .5, .7071.
  # margin(x0, y0) = 1 / ((.85355 + .5) / 2) = 1.4776, the best of x0 and y0;
  # y2's best, x0 at .7071 / ((.7071 + .85355) / 2) = .9062, comes last and
  # finds x0 taken: the in-between sentence stays unpaired.
  x = _unit([[1, 0], [0, 1]])
  y = _unit([[1, 0], [0, 1], [1, 1]])
  pairs = mining.mine(x, y, one_device, k=2)
  assert [(s, t) for s, t, _ in pairs] == [(0, 0), (1, 1)]
  expected = 1 / ((1 + math.sqrt(0.5)) / 2 + 0.5) * 2
  assert [m for _, _, m in pairs] == pytest.approx([expected, expected], abs=1e-6)


def _direct_mine(x, y, k):
  """The same procedure written out with loops, for comparison."""
  sim = x @ y.T
  fwd = [sorted(range(len(y)), key=lambda j: -sim[i, j])[:min(k, len(y))]
         for i in range(len(x))]
  bwd = [sorted(range(len(x)), key=lambda i: -sim[i, j])[:min(k, len(x))]
         for j in range(len(y))]
  mean_x = [np.mean([sim[i, j] for j in fwd[i]]) for i in range(len(x))]
  mean_y = [np.mean([sim[i, j] for i in bwd[j]]) for j in range(len(y))]
  margin = lambda i, j: sim[i, j] / ((mean_x[i] + mean_y[j]) / 2)
  best = [(i, max(fwd[i], key=lambda j: margin(i, j))) for i in range(len(x))]
  best += [(max(bwd[j], key=lambda i: margin(i, j)), j) for j in range(len(y))]
  used_x, used_y, out = set(), set(), []
  for i, j in sorted(best, key=lambda p: -margin(*p)):
    if i not in used_x and j not in used_y:
      used_x.add(i)
      used_y.add(j)
      if margin(i, j) > 0:
        out.append((i, j, margin(i, j)))
  return out


@pytest.mark.parametrize("sizes", [(9, 13), (13, 9), (3, 12)])
def test_mining_equals_the_direct_computation(sizes, one_device,
                                              two_cpu_strategy):
  rng = np.random.default_rng(sum(sizes))
  x = _unit(rng.normal(size=(sizes[0], 6)))
  y = _unit(rng.normal(size=(sizes[1], 6)))
  expected = _direct_mine(x.astype(np.float64), y.astype(np.float64), 4)
  for strategy in (one_device, two_cpu_strategy):
    mined = mining.mine(x, y, strategy)
    assert [(s, t) for s, t, _ in mined] == [(s, t) for s, t, _ in expected]
    assert [m for _, _, m in mined] == pytest.approx(
        [m for _, _, m in expected], rel=1e-5, abs=1e-5)


def test_threshold_is_halfway_after_the_best_f1_prefix():
  scores = {("s1", "e1"): 3.0, ("s2", "e2"): 2.5, ("s3", "e3"): 2.0,
            ("s4", "e4"): 1.0}
  gold = frozenset({("s1", "e1"), ("s3", "e3"), ("s5", "e5")})
  # Prefix F1: 1/2, 2/5, 2/3 (best), 4/7: the threshold lies between 2.0 and 1.0.
  threshold, chosen = mining.choose_threshold(scores, gold)
  assert threshold == pytest.approx(1.5)
  assert chosen == pytest.approx({"f1": 2 / 3, "precision": 2 / 3,
                                  "recall": 2 / 3})
  assert mining.extract(scores, threshold) == [("s1", "e1"), ("s2", "e2"),
                                             ("s3", "e3")]
  # Best at the last candidate: its own margin; no correct one at all: 0.
  assert mining.choose_threshold({("a", "b"): 2.0, ("c", "d"): 1.0},
                               frozenset({("a", "b"), ("c", "d")}))[0] == 1.0
  assert mining.choose_threshold(scores, frozenset({("x", "y")}))[0] == 0.0


def test_sentences_map_to_ids_and_repeated_ones_are_dropped(one_device):
  data = bitext.Bitext(
      task="bucc2018", split="dev", language="de",
      source_ids=("de-1", "de-2", "de-3"),
      source_sentences=("Hund", "Katze", "Katze"),
      target_ids=("en-1", "en-2"), target_sentences=("dog", "cat"),
      gold=frozenset({("de-1", "en-1")}), origin="test")
  vectors = {"Hund": [1, 0], "Katze": [0, 1], "dog": [1, 0.1], "cat": [0.1, 1]}
  embed = lambda sentences, _: _unit([vectors[s] for s in sentences])
  assert mining.sentence_to_id(data.source_ids, data.source_sentences) == {
      "Hund": "de-1"}
  scores = mining.candidates(data, embed, one_device)
  # "Katze" is written under two ids: its pair cannot be told apart.
  assert list(scores) == [("de-1", "en-1")]
  assert mining.pair_lines([("de-1", "en-1")]) == "de-1\ten-1\n"
