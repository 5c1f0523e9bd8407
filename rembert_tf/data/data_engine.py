"""The data commands' engine: steps mapped over units of work, run locally or on Apache Beam.

A `Step` maps `fn(item, previous)` over its items, then `combine(outputs,
previous)` (outputs in item order) makes the value the next step receives.
`run` runs the steps here, in `common.worker_pool` processes, or as one Apache
Beam pipeline (`runner=`; the direct names run Beam's Python local runner,
where Beam's `DirectRunner` would download its Go runner): the same functions
on the same items, so the same output. Imports without Beam.

Example:
```python
from rembert_tf.data import data_engine
steps = [data_engine.Step("Square", [1, 2, 3], lambda x, _: x * x,
                          lambda out, _: sum(out)),
         data_engine.Step("Add", [10], lambda x, total: x + total,
                          lambda out, _: out[0])]
assert data_engine.run(steps) == 24
```
"""
import concurrent.futures
import contextlib
import dataclasses
from typing import Any, Callable, Optional, Sequence

from rembert_tf.common import errors
from rembert_tf.common import worker_pool

DIRECT_RUNNERS = ("DirectRunner", "direct", "PrismRunner", "prism")


@dataclasses.dataclass(frozen=True)
class Step:
  """One map over `items`; `fn` runs on the workers (picklable), `combine`
  once; locally, `parallel` steps use the worker processes and `progress`
  sees each output as it arrives."""
  name: str
  items: Sequence[Any]
  fn: Callable[[Any, Any], Any]
  combine: Callable[[list, Any], Any]
  parallel: bool = False
  progress: Optional[Callable[[Any], None]] = None


def run(steps: Sequence[Step], *, num_workers: int = 1,
        runner: Optional[str] = None, beam_args: Sequence[str] = (),
        what: str = "data") -> Any:
  """The last step's combined value (None on Beam: read what it wrote)."""
  if runner:
    _run_beam(steps, runner, num_workers, beam_args)
    return None
  value = None
  with contextlib.ExitStack() as stack:
    pool = None
    for step in steps:
      outputs = [None] * len(step.items)
      if step.parallel and num_workers > 1 and len(step.items) > 1:
        pool = pool or stack.enter_context(worker_pool.pool(num_workers, what))
        futures = {pool.submit(step.fn, item, value): i
                   for i, item in enumerate(step.items)}
        done = ((futures[f], f.result())
                for f in concurrent.futures.as_completed(futures))
      else:
        done = ((i, step.fn(item, value)) for i, item in enumerate(step.items))
      for i, output in done:
        outputs[i] = output
        if step.progress:
          step.progress(output)
      value = step.combine(outputs, value)
  return value


def require_beam(flag: str = "--runner"):
  """The `apache_beam` module; errors.UsageError saying how to install it."""
  try:
    import apache_beam as beam  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise errors.UsageError(
        f"{flag} needs Apache Beam, which is not installed; install it with "
        "`pip install 'rembert_tf[beam]'`.") from None
  return beam


def _indexed(element, fn, previous):
  index, item = element
  return index, fn(item, previous)


def _combined(unused, combine, outputs, previous):
  return combine([o for _, o in sorted(outputs, key=lambda o: o[0])], previous)


def _run_beam(steps, runner: str, num_workers: int, beam_args) -> None:
  """One pipeline: each step's map, then its combine as a side input of the
  next; the local runner gets `num_workers` unless `beam_args` say."""
  beam = require_beam()
  from apache_beam.options import pipeline_options  # pylint: disable=g-import-not-at-top
  from apache_beam.runners.portability.fn_api_runner import fn_runner  # pylint: disable=g-import-not-at-top
  args, given = [f"--runner={runner}", *beam_args], " ".join(beam_args)
  if runner in DIRECT_RUNNERS and "direct_num_workers" not in given:
    args.append(f"--direct_num_workers={num_workers}")
    if num_workers > 1 and "direct_running_mode" not in given:
      args.append("--direct_running_mode=multi_processing")
  elif num_workers > 1 and "num_workers" not in given:
    args.append(f"--num_workers={num_workers}")
  pipeline = beam.Pipeline(
      runner=fn_runner.FnApiRunner() if runner in DIRECT_RUNNERS else runner,
      options=pipeline_options.PipelineOptions(args))
  value = pipeline | "Start" >> beam.Create([None])
  for step in steps:
    outputs = (pipeline
               | f"{step.name}Items" >> beam.Create(list(enumerate(step.items)))
               | f"{step.name}Spread" >> beam.Reshuffle()
               | step.name >> beam.Map(_indexed, step.fn,
                                       beam.pvalue.AsSingleton(value)))
    value = (pipeline
             | f"{step.name}Seed" >> beam.Create([None])
             | f"{step.name}Combine" >> beam.Map(
                 _combined, step.combine, beam.pvalue.AsList(outputs),
                 beam.pvalue.AsSingleton(value)))
  try:
    pipeline.run().wait_until_finish()
  except Exception as e:  # pylint: disable=broad-except
    lines = [l.strip() for l in str(e).splitlines() if l.strip()]
    raise errors.RemBertError(
        f"the Apache Beam pipeline on {runner} failed: "
        f"{lines[-1] if lines else type(e).__name__}; nothing was written to "
        "the output (see the runner's log for the workers' tracebacks).") from e
