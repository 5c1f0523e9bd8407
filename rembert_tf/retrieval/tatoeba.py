"""Tatoeba sentence retrieval: each English sentence's nearest sentence of the other language.

As XTREME's baseline, the prediction is that sentence's 0-based line number.
"""
from typing import Optional

import numpy as np

from rembert_tf.retrieval import bitext
from rembert_tf.retrieval import nearest_neighbors


def nearest_sources(source_embeddings: np.ndarray,
                    target_embeddings: np.ndarray, strategy) -> np.ndarray:
  """[targets] row of each target's nearest source sentence."""
  _, rows = nearest_neighbors.NeighborSearch(
      source_embeddings, strategy).top_k(target_embeddings, k=1)
  return rows[:, 0]


def predict(data: bitext.Bitext, embed, strategy) -> np.ndarray:
  """Embeds both sides (`embed(sentences, description)`) and searches."""
  where = f"{data.task} {data.language}"
  return nearest_sources(
      embed(data.source_sentences, f"{where}: embedding {data.language}"),
      embed(data.target_sentences, f"{where}: embedding en"), strategy)


def prediction_text(data: bitext.Bitext, nearest: np.ndarray) -> str:
  return "".join(f"{data.source_ids[row]}\n" for row in nearest)


def label_text(data: bitext.Bitext) -> Optional[str]:
  """The gold file's text (one source id per English sentence), if known."""
  if data.gold is None:
    return None
  aligned = data.gold_target_to_source()
  missing = [t for t in data.target_ids if t not in aligned]
  if missing:
    raise bitext.RetrievalDataError(
        f"{data.origin}: the gold alignment has no source sentence for "
        f"{len(missing)} English sentence(s) (e.g. line {missing[0]}).")
  return "".join(f"{aligned[t]}\n" for t in data.target_ids)
