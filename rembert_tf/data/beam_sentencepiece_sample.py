"""The SentencePiece training sample drawn by an Apache Beam pipeline.

Runs `sentencepiece_sample`'s steps where the text is, one input file per
element: counts per file, one `plan_sample`, each file's lines drawn, then
the lines in corpus order written to one file with their per-language counts
beside it (`PATH.json`). The sample is the local sampler's, byte for byte.
`rembert-train-sentencepiece --sample_with_beam` runs it.

Example:
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

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.data import beam_runner
from rembert_tf.data import sentencepiece_sample as sampler
from rembert_tf.data import text_inputs

try:
  import apache_beam as beam  # pylint: disable=g-import-not-at-top
except ImportError:  # pragma: no cover - depends on the installation
  beam = None


def _count(task, options):
  unit_index, input_file = task
  return unit_index, sampler.count_languages(
      [input_file], lambda _: None, options.languages, options.max_line_bytes)


def _plan(unused, counted, options):
  return sampler.plan_sample([c for _, c in sorted(counted)], options)


def _draw(task, plan, options):
  unit_index, input_file = task
  written: Dict[str, int] = {}
  lines = []
  for language, line in sampler.draw_file(input_file, unit_index, plan,
                                          options):
    written[language] = written.get(language, 0) + 1
    lines.append(line + "\n")
  return unit_index, "".join(lines), written


def _write(unused, drawn, plan, options, path):
  written: Dict[str, int] = {}
  with fileio.atomic_write(path, "w") as out:
    for _, text, counts in sorted(drawn, key=lambda d: d[0]):
      out.write(text)
      for language, n in counts.items():
        written[language] = written.get(language, 0) + n
  summary = sampler.sample_summary(plan.counts, plan.probabilities, written,
                                   options)
  fileio.write_json(path + ".json", summary)
  return summary["lines"]


def draw_sample(files: Sequence[text_inputs.InputFile], sample_path: str,
                options: "sampler.SampleOptions", *,
                runner: str = "DirectRunner", beam_args: Sequence[str] = (),
                inputs: Sequence[str] = (), num_workers: int = 1,
                log: Callable[..., None] = print) -> Dict[str, Any]:
  """Runs the sampling pipeline; returns the per-language summary."""
  if beam is None:
    raise errors.UsageError(
        "--sample_with_beam needs Apache Beam, which is not installed; install "
        "it with `pip install 'rembert_tf[beam]'`.")
  if runner not in beam_runner.DIRECT_RUNNERS and not fileio.is_remote(
      sample_path):
    raise errors.UsageError(
        f"--sample_path {sample_path!r} is local, but the {runner} workers "
        "cannot write to this machine; give a shared location "
        "(--sample_path gs://bucket/spm/sample.txt).")
  log(f"train_sentencepiece: drawing the sample of {len(files)} files with "
      f"Apache Beam {runner} -> {sample_path}")
  pipeline = beam.Pipeline(
      runner=beam_runner.runner(runner),
      options=beam_runner.pipeline_options(runner, num_workers, beam_args))
  tasks = list(enumerate(files))
  every_file = pipeline | "Files" >> beam.Create(tasks)
  plan = (pipeline
          | "PlanSeed" >> beam.Create([None])
          | "Plan" >> beam.Map(_plan, beam.pvalue.AsList(
              every_file | "Count" >> beam.Map(_count, options)), options))
  drawn = (every_file
           | "Spread" >> beam.Reshuffle()
           | "Draw" >> beam.Map(_draw, beam.pvalue.AsSingleton(plan), options))
  _ = (pipeline
       | "WriteSeed" >> beam.Create([None])
       | "Write" >> beam.Map(_write, beam.pvalue.AsList(drawn),
                             beam.pvalue.AsSingleton(plan), options,
                             sample_path))
  beam_runner.run_to_completion(pipeline, runner)
  summary = fileio.read_json(sample_path + ".json")
  try:
    sampler.check_has_text(sampler.counts_of_summary(summary), inputs, log,
                           options.max_line_bytes)
  except text_inputs.TextInputError:
    for written in (sample_path, sample_path + ".json"):
      fileio.remove(written)
    raise  # also an input without any text
  return summary
