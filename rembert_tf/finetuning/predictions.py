"""A fine-tuned model's predictions in the benchmark layout, and their scores.

Writes `predictions/<task>/<split>-<lang>.{tsv,json}` as XTREME's scorer
reads it (the text comes from `task_types.TaskType.prediction_text`) and
scores the labelled splits with `evaluation.xtreme_scorer`.
"""
import collections
from typing import Dict, Optional, Sequence

import numpy as np
import tensorflow as tf

from rembert_tf.common import fileio
from rembert_tf.evaluation import xtreme_scorer
from rembert_tf.finetuning import finetuning_task
from rembert_tf.finetuning import task_types

SCORES_FILE = "scores.json"


class Predictor:
  """Model outputs per record, in record order (one traced step per run)."""

  def __init__(self, task: finetuning_task.FinetuningTask, model, strategy,
               eval_batch_size: int):
    self._task, self._strategy = task, strategy
    replicas = strategy.num_replicas_in_sync
    self._batch_size = max(eval_batch_size - eval_batch_size % replicas,
                           replicas)
    self._step = tf.function(
        lambda inputs: strategy.run(task.predict_step, args=(inputs, model)))

  def predict(self, records_file: str, num_records: int,
              seq_length: int) -> Dict[str, np.ndarray]:
    data = finetuning_task.FinetuningDataConfig(
        input_path=records_file, global_batch_size=self._batch_size,
        seq_length=seq_length, is_training=False, num_records=num_records)
    dataset = self._strategy.distribute_datasets_from_function(
        lambda context: self._task.build_inputs(data, context))
    collected = collections.defaultdict(list)
    for inputs in dataset:
      for key, value in self._step(inputs).items():
        for local in self._strategy.experimental_local_results(value):
          collected[key].append(local.numpy())
    result = {k: np.concatenate(v) for k, v in collected.items()}
    keep = result["feature_index"] >= 0
    order = np.argsort(result["feature_index"][keep], kind="stable")
    return {k: v[keep][order] for k, v in result.items()}


def english_dev_metric(meta: Dict, scores_by_split: Dict) -> Optional[float]:
  """English's headline dev score (else on the scored split): what a sweep selects on."""
  for split in ("dev", meta["score_split"]):
    if scores_by_split.get(split):
      score = xtreme_scorer.headline_score(meta["task"],
                                           scores_by_split[split], "en")
      if score is not None:
        return score
  return None


def predict_and_score(predictor: Predictor, meta: Dict, records_dir: str,
                      run_dir: str, n_best_size: int, max_answer_length: int,
                      splits: Sequence[str]) -> Dict:
  """Writes every split's predictions; scores the labelled ones."""
  task, kind = meta["task"], task_types.get(meta["task_type"])
  extension = xtreme_scorer.task_metric(task).extension
  pred_dir = fileio.join(run_dir, "predictions")
  scores_by_split = {}
  for split in splits:
    languages = meta["splits"].get(split, {})
    for lang, info in languages.items():
      name = f"{split}-{lang}"
      text = ""
      if info["num_features"]:
        outputs = predictor.predict(fileio.join(records_dir, info["file"]),
                                    info["num_features"], meta["seq_length"])
        text = kind.prediction_text(task_types.PredictionContext(
            records_dir, name, info, meta["labels"], n_best_size,
            max_answer_length), outputs)
      fileio.write_text(fileio.join(
          pred_dir, task, f"{name}.{extension}"), text)
    labelled = [l for l, info in languages.items() if info.get("has_labels")]
    if labelled:
      scores_by_split[split] = xtreme_scorer.score_task(
          task, pred_dir, fileio.join(records_dir, "labels"), split=split,
          languages=labelled)
  xtreme_scorer.write_json(scores_by_split, fileio.join(run_dir, SCORES_FILE))
  return scores_by_split
