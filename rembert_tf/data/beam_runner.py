"""Running the data commands' Apache Beam pipelines: options, runner, errors.

The direct runner names run on Beam's Python `FnApiRunner` (Beam's
`DirectRunner` would download its Go runner), and a pipeline failure reaches
the user as one line naming the worker's exception. Imports without Beam.

Example:
```python
import apache_beam as beam
from rembert_tf.data import beam_runner
pipeline = beam.Pipeline(
    runner=beam_runner.runner("DirectRunner"),
    options=beam_runner.pipeline_options("DirectRunner", 2, []))
_ = pipeline | beam.Create([1, 2, 3]) | beam.Map(print)
beam_runner.run_to_completion(pipeline, "DirectRunner")
```
"""
from typing import Sequence

from rembert_tf.common import errors

try:
  from apache_beam.options import pipeline_options as beam_options  # pylint: disable=g-import-not-at-top
except ImportError:  # pragma: no cover - depends on the installation
  beam_options = None

DIRECT_RUNNERS = ("DirectRunner", "direct", "PrismRunner", "prism")


def pipeline_options(runner: str, num_workers: int, beam_args: Sequence[str]):
  """Beam options: the runner, the local runner's workers, the user's options."""
  args = [f"--runner={runner}", *beam_args]
  given = " ".join(beam_args)
  if runner in DIRECT_RUNNERS and "direct_num_workers" not in given:
    args.append(f"--direct_num_workers={num_workers}")
    if num_workers > 1 and "direct_running_mode" not in given:
      args.append("--direct_running_mode=multi_processing")
  elif num_workers > 1 and "num_workers" not in given:
    args.append(f"--num_workers={num_workers}")
  return beam_options.PipelineOptions(args)


def runner(name: str):
  """The runner object: Beam's Python local runner for the direct names."""
  if name in DIRECT_RUNNERS:
    from apache_beam.runners.portability.fn_api_runner import fn_runner  # pylint: disable=g-import-not-at-top
    return fn_runner.FnApiRunner()
  return name


def run_to_completion(pipeline, runner_name: str) -> None:
  """Runs `pipeline` and waits; a failure becomes one line (errors.RemBertError)."""
  try:
    pipeline.run().wait_until_finish()
  except Exception as e:  # pylint: disable=broad-except
    lines = [l.strip() for l in str(e).splitlines() if l.strip()]
    raise errors.RemBertError(
        f"the Apache Beam pipeline on {runner_name} failed: "
        f"{lines[-1] if lines else type(e).__name__}; nothing was written to "
        "the output (see the runner's log for the workers' tracebacks).") from e
