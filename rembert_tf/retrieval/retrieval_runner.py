"""The work of `rembert-retrieve`: BUCC 2018 and Tatoeba predictions, and their scores where gold is known.

For each task and language a `bitext.BitextSource` gives the data, a
`SentenceEmbedder` embeds it and `tatoeba` or `bucc` predicts. Writes
`predictions/`, `labels/` (where gold is known) and results.json / .md,
swapped in as one set.

Example:
<!-- snippet: not run: a fragment: `strategy` comes from the caller's code -->
```python
from rembert_tf.retrieval import download_layout, retrieval_runner, sentence_embedder
embedder = sentence_embedder.SentenceEmbedder.from_checkpoint("runs/pretrain", strategy)
results = retrieval_runner.run_retrieval(
    {"tatoeba": ["de", "fr"], "bucc2018": ["de"]},
    download_layout.DownloadSource("download"), embedder, strategy, "runs/retrieve")
results["scores"]["tatoeba"]["avg_accuracy"]
```
"""
import dataclasses
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.evaluation import xtreme_scorer
from rembert_tf.retrieval import bitext
from rembert_tf.retrieval import bucc
from rembert_tf.retrieval import tatoeba

SPLIT = "test"
RESULTS_JSON = "results.json"
RESULTS_MARKDOWN = "results.md"


@dataclasses.dataclass
class TaskOutput:
  """One task's files (text by language) and what mining chose."""
  predictions: Dict[str, str] = dataclasses.field(default_factory=dict)
  labels: Dict[str, str] = dataclasses.field(default_factory=dict)
  thresholds: Dict[str, float] = dataclasses.field(default_factory=dict)
  sample_scores: Dict[str, Dict[str, float]] = dataclasses.field(
      default_factory=dict)
  counts: Dict[str, int] = dataclasses.field(default_factory=dict)


def _tatoeba_language(output: TaskOutput, source, lang, embed, strategy,
                      progress):
  data = source(bitext.TATOEBA, SPLIT, lang)
  nearest = tatoeba.predict(data, embed, strategy)
  output.predictions[lang] = tatoeba.prediction_text(data, nearest)
  output.counts[lang] = len(nearest)
  labels = tatoeba.label_text(data)
  if labels is not None:
    output.labels[lang] = labels
  progress(f"tatoeba {lang}: {len(nearest)} English sentences matched among "
           f"{len(data.source_sentences)}")


def _bucc_language(output: TaskOutput, source, lang, embed, strategy,
                   progress):
  sample = source(bitext.BUCC, "dev", lang)
  if sample.gold is None:
    raise bitext.RetrievalDataError(
        f"{sample.origin}: BUCC's sample set for {lang} has no gold alignment; "
        "the threshold is chosen on it (XTREME's download keeps it as "
        f"bucc2018/{lang}-en.dev.gold).")
  threshold, sample_scores = bucc.choose_threshold(
      bucc.candidates(sample, embed, strategy), sample.gold)
  test = source(bitext.BUCC, SPLIT, lang)
  pairs = bucc.extract(bucc.candidates(test, embed, strategy), threshold)
  output.predictions[lang] = bucc.pair_lines(pairs)
  output.thresholds[lang] = threshold
  output.sample_scores[lang] = {k: 100 * v for k, v in sample_scores.items()}
  output.counts[lang] = len(pairs)
  if test.gold is not None:
    output.labels[lang] = bucc.pair_lines(sorted(test.gold))
  progress(f"bucc2018 {lang}: threshold {threshold:.4f} (sample-set F1 "
           f"{100 * sample_scores['f1']:.2f}), {len(pairs)} pairs predicted")


LANGUAGE_RUNNERS = {bitext.TATOEBA: _tatoeba_language,
                    bitext.BUCC: _bucc_language}


# The output of a run, replaced as one set (`outputs.atomic_file_set`): the
# predictions and labels of every task, and the results (the JSON last).
OUTPUT_SET = ("predictions", "labels", RESULTS_MARKDOWN, RESULTS_JSON)


def check_outputs(output_dir, tasks: Sequence[str], overwrite: bool) -> None:
  """Refuses, before any work, to replace an earlier run's output unasked."""
  del tasks  # Every task's output is one set.
  outputs.refuse_existing_members(output_dir, OUTPUT_SET, overwrite)


def _write_task_files(folder, task: str, texts: Dict[str, str]):
  """FOLDER/<task>/<split>-<lang>.tsv of every language in `texts`."""
  for lang, text in texts.items():
    fileio.write_text(fileio.join(folder, task, f"{SPLIT}-{lang}.tsv"), text)


def _label_file(task: str, lang: str, output_dir,
                label_folder: Optional[str]) -> Optional[str]:
  """The gold file of a language: from label_folder, else the one written."""
  for folder in (label_folder, fileio.join(output_dir, "labels")):
    if folder and fileio.isfile(fileio.join(folder, task, f"{SPLIT}-{lang}.tsv")):
      return folder
  return None


def _score(task: str, output: TaskOutput, output_dir,
           label_folder: Optional[str]) -> Optional[Dict]:
  """Official-shape scores of the languages that have gold labels."""
  per_language = {}
  for lang in output.predictions:
    folder = _label_file(task, lang, output_dir, label_folder)
    if folder is not None:
      per_language[lang] = xtreme_scorer.score_file_pair(
          task, fileio.join(output_dir, "predictions", task, f"{SPLIT}-{lang}.tsv"),
          fileio.join(folder, task, f"{SPLIT}-{lang}.tsv"), lang)
  return xtreme_scorer.add_averages(task, per_language) if per_language else None


def markdown(results: Dict) -> str:
  """The results as markdown: test scores, then BUCC's thresholds."""
  lines = [f"## Retrieval with {results['encoder']}, layer {results['layer']} "
           f"of {results['num_layers']}", ""]
  if results["scores"]:
    lines.append(xtreme_scorer.format_markdown(results["scores"]))
  unscored = [t for t in results["tasks"] if t not in results["scores"]]
  for task in unscored:
    lines.append(f"{task}: predictions written, no gold labels to score them "
                 "(give --label_folder).\n")
  bucc_result = results["tasks"].get(bitext.BUCC)
  if bucc_result:
    lines += ["### bucc2018 thresholds (chosen on the sample set)", "",
              "| language | threshold | sample F1 | predicted pairs |",
              "| --- | --- | --- | --- |"]
    for lang, threshold in bucc_result["thresholds"].items():
      lines.append(f"| {lang} | {threshold:.4f} | "
                   f"{bucc_result['sample_scores'][lang]['f1']:.2f} | "
                   f"{bucc_result['num_predictions'][lang]} |")
  return "\n".join(lines) + "\n"


def read_all(tasks: Dict[str, List[str]], source: bitext.BitextSource
             ) -> Dict[Tuple[str, str, str], bitext.Bitext]:
  """Every split of every (task, language), read and checked before any embedding."""
  return {(task, split, lang): source(task, split, lang)
          for task, languages in tasks.items() for lang in languages
          for split in bitext.SPLITS[task]}


def run_retrieval(tasks: Dict[str, List[str]], source: bitext.BitextSource,
                  embedder, strategy, output_dir,
                  label_folder: Optional[str] = None, overwrite: bool = False,
                  progress: Callable[[str], None] = print) -> Dict:
  """Predicts, writes and scores every (task, language) of `tasks` ({task:
  [languages]}); returns the results dict of results.json."""
  output_dir = fileio.as_str(output_dir)
  check_outputs(output_dir, tasks, overwrite)
  start = time.perf_counter()
  loaded = read_all(tasks, source)
  task_outputs = {}
  for task, languages in tasks.items():
    task_outputs[task] = TaskOutput()
    for lang in languages:
      LANGUAGE_RUNNERS[task](task_outputs[task], lambda *key: loaded[key], lang,
                             embedder.embed, strategy, progress)
  with outputs.atomic_file_set(output_dir, OUTPUT_SET, overwrite) as staging:
    return _write_results(staging, task_outputs, embedder, label_folder,
                          start)


def _write_results(output_dir: str, task_outputs: Dict[str, "TaskOutput"],
                   embedder, label_folder: Optional[str], start: float) -> Dict:
  """Writes every task's files and the results into the staging folder; returns the results."""
  for task, output in task_outputs.items():
    _write_task_files(fileio.join(output_dir, "predictions"), task,
                      output.predictions)
    _write_task_files(fileio.join(output_dir, "labels"), task, output.labels)
  results = dict(encoder=embedder.source, layer=embedder.layer,
                 num_layers=embedder.num_layers,
                 seq_length=embedder.seq_length, label_folder=label_folder,
                 tasks={}, scores={})
  for task, output in task_outputs.items():
    results["tasks"][task] = dict(
        languages=list(output.predictions), num_predictions=output.counts,
        **({"thresholds": output.thresholds,
            "sample_scores": output.sample_scores}
           if task == bitext.BUCC else {}))
    scores = _score(task, output, output_dir, label_folder)
    if scores is not None:
      results["scores"][task] = scores
  results["seconds"] = round(time.perf_counter() - start, 1)
  fileio.write_text(fileio.join(output_dir, RESULTS_MARKDOWN), markdown(results))
  # The JSON last: its presence means the run is complete.
  xtreme_scorer.write_json(results, fileio.join(output_dir, RESULTS_JSON))
  return results
