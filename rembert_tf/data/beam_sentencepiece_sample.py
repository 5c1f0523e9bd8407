"""The SentencePiece training sample drawn by an Apache Beam pipeline.

For terabytes of text the vocabulary's only single-machine step should be
SentencePiece itself, on a sample of a few million lines. This pipeline draws
that sample where the text is (Dataflow, Flink, Spark or Beam's local runner):

1. **First pass**: lines and bytes per language (one element per input file).
2. **Plan**: the language shares q_l ~ p_l**alpha of
   `sentencepiece_sample` (p_l from bytes, languages without lines get 0)
   and the quota Q_l = round(sample_size * q_l) of each language; a line of
   language l is taken r_l = Q_l / n_l times in expectation (low-resource
   lines repeated, high-resource lines subsampled).
3. **Draw**: each line is written floor(r_l) times plus once more with
   probability frac(r_l), from a generator seeded by (seed, file), so the
   sample is deterministic. Quotas hold in expectation (the local sampler's
   are exact), which is what SentencePiece needs.
4. **Write**: the sample lines in corpus order to one text file (any
   filesystem) and their per-language counts beside it (`PATH.json`).

`rembert-train-sentencepiece --sample_with_beam` runs it, then trains on the
sample; with `--sample_only` it stops after writing the sample.

Example (Beam's local runner):
<!-- snippet: not run: needs a corpus and Apache Beam -->
```python
from rembert_tf.data import beam_sentencepiece_sample, sentencepiece_sample
from rembert_tf.data import text_inputs
files = text_inputs.resolve_inputs(["/tmp/corpus/{lang}/*.txt"])
summary = beam_sentencepiece_sample.draw_sample(
    files, "/tmp/spm_sample.txt", sentencepiece_sample.SampleOptions(
        sample_size=100_000), runner="DirectRunner")
```
"""
from typing import Any, Callable, Dict, Sequence

import numpy as np

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.data import beam_runner
from rembert_tf.data import sentencepiece_sample
from rembert_tf.data import text_inputs

try:
  import apache_beam as beam  # pylint: disable=g-import-not-at-top
  from apache_beam.options import pipeline_options as beam_options  # pylint: disable=g-import-not-at-top
except ImportError:  # pragma: no cover - depends on the installation
  beam = None


def _file_counts(task, options):
  """(language, (lines, bytes, longest skipped line)) of one file; lines
  SentencePiece would skip are left out as the local sampler leaves them."""
  _, input_file = task
  counts = sentencepiece_sample.count_languages(
      [input_file], log=lambda _: None, keep=options.languages,
      max_line_bytes=options.max_line_bytes)
  return [(l, (counts.lines.get(l, 0), counts.sizes.get(l, 0),
               counts.longest_skipped.get(l, 0)))
          for l in sorted(set(counts.lines) | set(counts.sizes)) if l]


def _sum_counts(triples):
  lines = size = longest = 0
  for n, b, skipped in triples:
    lines += n
    size += b
    longest = max(longest, skipped)
  return lines, size, longest


def _rates(unused, per_language, options):
  """Expected repeats of a line per language (step 2)."""
  counts = sentencepiece_sample.LanguageCounts(
      lines={l: v[0] for l, v in per_language},
      sizes={l: v[1] for l, v in per_language},
      longest_skipped={l: v[2] for l, v in per_language if v[2]})
  total = sum(counts.lines.values())
  if total == 0:  # Reported after the run as a TextInputError.
    return {"counts": counts, "probabilities": {}, "rates": {}}
  probabilities = counts.probabilities(options.language_sampling_alpha)
  sample_size = min(options.sample_size, total)
  rates = {}
  for lang, n in counts.lines.items():
    quota = int(round(sample_size * probabilities.get(lang, 0.0)))
    rates[lang] = quota / n if n else 0.0
  return {"counts": counts, "probabilities": probabilities, "rates": rates}


def _draw(task, plan, seed, options):
  """(unit, line number, language, line) for every copy of a drawn line
  (lines SentencePiece would skip are not drawn)."""
  unit_index, input_file = task
  rng = np.random.default_rng([seed, unit_index])
  rates = plan["rates"]
  line_number = 0
  for language, document in text_inputs.iter_language_documents(
      input_file, keep=options.languages):
    rate = rates.get(language, 0.0)
    whole = int(np.floor(rate))
    extras = rng.random(len(document)) < rate - whole
    for line, extra in zip(document, extras.tolist()):
      line_number += 1
      if sentencepiece_sample.line_bytes(line) > options.max_line_bytes:
        continue
      for _ in range(whole + int(extra)):
        yield unit_index, line_number, language, line


def _write(unused, drawn, plan, options, path):
  drawn = sorted(drawn)
  written: Dict[str, int] = {}
  with fileio.atomic_write(path, "w") as out:
    for _, _, language, line in drawn:
      written[language] = written.get(language, 0) + 1
      out.write(line.replace("\n", " ") + "\n")
  summary = sentencepiece_sample.sample_summary(
      plan["counts"], plan["probabilities"], written, options)
  fileio.write_json(path + ".json", summary)
  return summary["lines"]


def draw_sample(files: Sequence[text_inputs.InputFile], sample_path: str,
                options: "sentencepiece_sample.SampleOptions", *,
                runner: str = "DirectRunner", beam_args: Sequence[str] = (),
                inputs: Sequence[str] = (), num_workers: int = 1,
                log: Callable[..., None] = print) -> Dict[str, Any]:
  """Runs the sampling pipeline; returns the per-language summary."""
  if beam is None:
    raise errors.UsageError(
        "--sample_with_beam needs Apache Beam, which is not installed; install "
        "it with `pip install 'rembert_tf[beam]'`.")
  direct = runner in beam_runner.DIRECT_RUNNERS
  if not direct and not fileio.is_remote(sample_path):
    raise errors.UsageError(
        f"--sample_path {sample_path!r} is local, but the {runner} workers "
        "cannot write to this machine; give a shared location "
        "(--sample_path gs://bucket/spm/sample.txt).")
  args = [f"--runner={runner}", *beam_args]
  if direct and "direct_num_workers" not in " ".join(beam_args):
    args.append(f"--direct_num_workers={num_workers}")
  log(f"train_sentencepiece: drawing the sample of {len(files)} files with "
      f"Apache Beam {runner} -> {sample_path}")
  if direct:  # Beam's Python local runner (nothing downloaded).
    pipeline = beam.Pipeline(runner=beam_runner.runner(runner),
                             options=beam_options.PipelineOptions(args))
  else:
    pipeline = beam.Pipeline(options=beam_options.PipelineOptions(args))
  _build_pipeline(pipeline, list(enumerate(files)), options, sample_path)
  beam_runner.run_to_completion(pipeline, runner)
  summary = fileio.read_json(sample_path + ".json")
  try:
    sentencepiece_sample.check_has_text(
        sentencepiece_sample.counts_of_summary(summary), inputs, log,
        options.max_line_bytes)
  except text_inputs.TextInputError:
    for written in (sample_path, sample_path + ".json"):
      fileio.remove(written)
    raise  # also an input without any text
  return summary


def _build_pipeline(pipeline, tasks, options, sample_path: str) -> None:
  """Adds steps 1-4 (see the module doc) to `pipeline`."""
  every_file = pipeline | "Files" >> beam.Create(tasks)
  per_language = (every_file
                  | "CountLines" >> beam.FlatMap(_file_counts, options)
                  | "SumPerLanguage" >> beam.CombinePerKey(_sum_counts))
  plan = (pipeline
          | "PlanSeed" >> beam.Create([None])
          | "Plan" >> beam.Map(_rates, beam.pvalue.AsList(per_language),
                               options))
  drawn = (every_file
           | "Spread" >> beam.Reshuffle()
           | "Draw" >> beam.FlatMap(_draw, beam.pvalue.AsSingleton(plan),
                                    options.seed, options))
  _ = (pipeline
       | "WriteSeed" >> beam.Create([None])
       | "Write" >> beam.Map(_write, beam.pvalue.AsList(drawn),
                             beam.pvalue.AsSingleton(plan), options,
                             sample_path))
