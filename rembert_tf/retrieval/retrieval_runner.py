"""The work of `rembert-retrieve`: BUCC 2018 and Tatoeba predictions, and their scores where gold is known.

For each task and language a `bitext` source gives the data, a
`SentenceEmbedder` embeds it; Tatoeba takes each English sentence's nearest
neighbour (its 0-based line number, as XTREME's baseline), BUCC mines pairs
(`mining`). Writes `predictions/`, `labels/` (where gold is known) and
results.json / .md, swapped in as one set.
"""
import time
from typing import Callable, Dict, List, Optional

from rembert_tf.common import fileio
from rembert_tf.common import output_sets
from rembert_tf.evaluation import xtreme_scorer
from rembert_tf.retrieval import bitext
from rembert_tf.retrieval import mining

SPLIT = "test"
RESULTS_JSON = "results.json"
RESULTS_MARKDOWN = "results.md"
# The output of a run, replaced as one set (`output_sets.atomic_file_set`): the
# predictions and labels of every task, and the results (the JSON last).
OUTPUT_SET = ("predictions", "labels", RESULTS_MARKDOWN, RESULTS_JSON)


def _tatoeba(loaded, lang, embed, strategy, summary, progress):
  """(prediction text, label text or None) of one language."""
  data = loaded[bitext.TATOEBA, SPLIT, lang]
  sources = embed(data.source_sentences, f"tatoeba {lang}: embedding {lang}")
  _, rows = mining.top_k(
      embed(data.target_sentences, f"tatoeba {lang}: embedding en"), sources,
      1, strategy)
  summary["num_predictions"][lang] = len(rows)
  progress(f"tatoeba {lang}: {len(rows)} English sentences matched among "
           f"{len(data.source_sentences)}")
  # TFDS's gold: a source sentence for every English one, in order.
  aligned = {target: source for source, target in data.gold or ()}
  return ("".join(f"{data.source_ids[row]}\n" for row in rows[:, 0]),
          "".join(f"{aligned[t]}\n" for t in data.target_ids) if aligned
          else None)


def _bucc(loaded, lang, embed, strategy, summary, progress):
  """(prediction text, label text or None) of one language."""
  sample = loaded[bitext.BUCC, "dev", lang]  # with its gold, as sources read it
  threshold, sample_scores = mining.choose_threshold(
      mining.candidates(sample, embed, strategy), sample.gold)
  test = loaded[bitext.BUCC, SPLIT, lang]
  pairs = mining.extract(mining.candidates(test, embed, strategy), threshold)
  summary.setdefault("thresholds", {})[lang] = threshold
  summary.setdefault("sample_scores", {})[lang] = {
      k: 100 * v for k, v in sample_scores.items()}
  summary["num_predictions"][lang] = len(pairs)
  progress(f"bucc2018 {lang}: threshold {threshold:.4f} (sample-set F1 "
           f"{100 * sample_scores['f1']:.2f}), {len(pairs)} pairs predicted")
  return mining.pair_lines(pairs), (None if test.gold is None
                                    else mining.pair_lines(sorted(test.gold)))


def _score(task: str, languages, output_dir: str,
           label_folder: Optional[str]) -> Dict[str, Dict[str, float]]:
  """{lang: scores} of the languages with gold labels: in label_folder, else
  those written to output_dir/labels."""
  per_language = {}
  for lang in languages:
    name = fileio.join(task, f"{SPLIT}-{lang}.tsv")
    for folder in (label_folder, fileio.join(output_dir, "labels")):
      if folder and fileio.isfile(fileio.join(folder, name)):
        per_language[lang] = xtreme_scorer.score_file_pair(
            task, fileio.join(output_dir, "predictions", name),
            fileio.join(folder, name), lang)
        break
  return per_language


def markdown(results: Dict) -> str:
  """The results as markdown: test scores, then BUCC's thresholds."""
  lines = [f"## Retrieval with {results['encoder']}, layer {results['layer']} "
           f"of {results['num_layers']}", ""]
  if results["scores"]:
    lines.append(xtreme_scorer.format_markdown(results["scores"]))
  lines += [f"{task}: predictions written, no gold labels to score them "
            "(give --label_folder).\n" for task in results["tasks"]
            if task not in results["scores"]]
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


def run_retrieval(tasks: Dict[str, List[str]], source, embedder, strategy,
                  output_dir,
                  label_folder: Optional[str] = None, overwrite: bool = False,
                  progress: Callable[[str], None] = print) -> Dict:
  """Predicts, writes and scores every (task, language) of `tasks` ({task:
  [languages]}); returns the results dict of results.json."""
  output_dir = fileio.as_str(output_dir)
  output_sets.refuse_existing_members(output_dir, OUTPUT_SET, overwrite)
  start = time.perf_counter()
  # Every split read and checked before any embedding.
  loaded = {(task, split, lang): source(task, split, lang)
            for task, languages in tasks.items() for lang in languages
            for split in bitext.SPLITS[task]}
  results = dict(encoder=embedder.source, layer=embedder.layer,
                 num_layers=embedder.num_layers,
                 seq_length=embedder.seq_length, label_folder=label_folder,
                 tasks={}, scores={})
  texts = {}  # (folder, task, lang) -> the file's text
  for task, languages in tasks.items():
    summary = results["tasks"][task] = dict(languages=list(languages),
                                            num_predictions={})
    run = _tatoeba if task == bitext.TATOEBA else _bucc
    for lang in languages:
      texts["predictions", task, lang], texts["labels", task, lang] = run(
          loaded, lang, embedder.embed, strategy, summary, progress)
  with output_sets.atomic_file_set(output_dir, OUTPUT_SET, overwrite) as staging:
    for (folder, task, lang), text in texts.items():
      if text is not None:
        fileio.write_text(
            fileio.join(staging, folder, task, f"{SPLIT}-{lang}.tsv"), text)
    for task, languages in tasks.items():
      scores = _score(task, languages, staging, label_folder)
      if scores:  # the official shape, with averages
        results["scores"][task] = xtreme_scorer.add_averages(task, scores)
    results["seconds"] = round(time.perf_counter() - start, 1)
    fileio.write_text(fileio.join(staging, RESULTS_MARKDOWN), markdown(results))
    # The JSON last: its presence means the run is complete.
    xtreme_scorer.write_json(results, fileio.join(staging, RESULTS_JSON))
  return results
