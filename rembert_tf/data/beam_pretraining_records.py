"""Pre-training records on Apache Beam: the record engine's steps as a pipeline.

Runs `pretraining_record_engine`'s steps on Dataflow, Flink, Spark or Beam's
local runner: bytes per language per input file, then the language plan; one
input file per element becomes its records (`unit_records`); a shard's
records are grouped, put in unit order and written (`write_shard`), then
metadata.json. The shards are byte-identical to the local engine's for a
seed. A shard is assembled in one worker's memory, so choose
`--num_output_shards` accordingly. Needs `pip install 'rembert_tf[beam]'`.

Example:
<!-- snippet: not run: needs a corpus, a SentencePiece model and Apache Beam -->
```python
from rembert_tf.data import pretraining_record_creation
meta = pretraining_record_creation.create_pretraining_data(
    ["/tmp/corpus/{lang}/*.txt"], "/tmp/records_beam",
    "/tmp/spm/sentencepiece.model", seq_length=128, num_output_shards=4,
    runner="DirectRunner", num_workers=2)
```
"""
from typing import Any, Callable, Dict, List, Sequence, Tuple

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.data import beam_runner
from rembert_tf.data import pretraining_record_engine as engine
from rembert_tf.data import pretraining_instances
from rembert_tf.data import pretraining_record_format
from rembert_tf.data import text_inputs
from rembert_tf.data import tfrecord_writer

try:
  import apache_beam as beam  # pylint: disable=g-import-not-at-top
except ImportError:  # pragma: no cover - depends on the installation
  beam = None

# A unit's records of one shard go on in batches of about this many bytes.
BATCH_BYTES = 8 << 20


def require_beam() -> None:
  if beam is None:
    raise errors.UsageError(
        "--runner needs Apache Beam, which is not installed; install it with "
        "`pip install 'rembert_tf[beam]'` or leave --runner unset for the "
        "local multiprocess engine.")


# ----------------------------------------------------------------------------
# Transforms (module-level functions: picklable for every runner).

def _language_bytes(task, keep):
  _, input_file = task
  return list(text_inputs.file_language_bytes(input_file, keep).items())


def _plan(unused, sizes, alpha, dupe_factor, inputs):
  return pretraining_instances.plan_languages(dict(sizes), alpha, dupe_factor,
                                              inputs)


class _UnitRecords(beam.DoFn if beam else object):
  """(unit, file) -> (shard, ((unit, batch), framed records)); the unit's
  counts (`UnitResult`) on the side."""

  def __init__(self, job: pretraining_instances.RecordJob, keep):
    self._job = job
    self._keep = keep

  def setup(self):
    pretraining_instances.sentencepiece_processor(
        self._job.sentencepiece_model)

  def process(self, task, plan):
    unit_index, input_file = task
    result = pretraining_instances.UnitResult(unit_index, input_file.path)
    pending: Dict[int, List[bytes]] = {}
    size, batch = 0, 0
    for shard, record in engine.unit_records(
        unit_index, input_file, plan.passes, self._job, result, self._keep):
      pending.setdefault(shard, []).append(record)
      size += len(record)
      if size > BATCH_BYTES:
        yield from self._batches(pending, unit_index, batch)
        pending, size, batch = {}, 0, batch + 1
    yield from self._batches(pending, unit_index, batch)
    yield beam.pvalue.TaggedOutput("results", result)

  @staticmethod
  def _batches(pending, unit_index, batch):
    for shard, records in sorted(pending.items()):
      yield shard, ((unit_index, batch), tfrecord_writer.frame_each(records))


def _write_shard(element, results, staging: str, options):
  shard_index, batches = element
  framed = [record for _, batch in sorted(b for b in batches if b)
            for record in batch]
  return engine.write_shard(shard_index, framed, _in_unit_order(results),
                            staging, options)


def _in_unit_order(results) -> List[pretraining_instances.UnitResult]:
  return sorted(results, key=lambda r: r.unit_index)


def _write_metadata(unused, plan, results, shards, prepared, staging):
  meta = engine.write_metadata(prepared, plan, _in_unit_order(results),
                               sorted(shards, key=lambda s: s["file"]),
                               staging)
  return meta["num_examples"]


def build_pipeline(pipeline, prepared: "pretraining_instances.Prepared",
                   staging: str) -> None:
  """Adds the record-creation transforms to `pipeline` (see module doc)."""
  options = prepared.job.options
  sizes = (pipeline
           | "Files" >> beam.Create(list(enumerate(prepared.files)))
           | "LanguageBytes" >> beam.FlatMap(_language_bytes,
                                             prepared.languages)
           | "SumBytes" >> beam.CombinePerKey(sum))
  plan = (pipeline
          | "PlanSeed" >> beam.Create([None])
          | "Plan" >> beam.Map(_plan, beam.pvalue.AsList(sizes),
                               options.language_sampling_alpha,
                               options.dupe_factor, prepared.inputs))
  units = (pipeline
           | "Units" >> beam.Create(prepared.tasks)
           | "SpreadUnits" >> beam.Reshuffle()
           | "Records" >> beam.ParDo(
               _UnitRecords(prepared.job, prepared.languages),
               beam.pvalue.AsSingleton(plan)).with_output_types(
                   Tuple[int, Any]).with_outputs("results", main="records"))
  results = beam.pvalue.AsList(units.results)
  every_shard = pipeline | "ShardIndexes" >> beam.Create(
      [(k, None) for k in range(options.num_output_shards)]
  ).with_output_types(Tuple[int, Any])
  shards = ((units.records, every_shard)
            | "WithEmptyShards" >> beam.Flatten()
            | "GroupByShard" >> beam.GroupByKey()
            | "WriteShards" >> beam.Map(_write_shard, results, staging,
                                        options))
  _ = (pipeline
       | "MetadataSeed" >> beam.Create([None])
       | "WriteMetadata" >> beam.Map(
           _write_metadata, beam.pvalue.AsSingleton(plan), results,
           beam.pvalue.AsList(shards), prepared, staging))


def run_pipeline(prepared: "pretraining_instances.Prepared", staging: str, *,
                 runner: str, num_workers: int = 1,
                 beam_args: Sequence[str] = (),
                 log: Callable[[str], None] = print) -> Dict[str, Any]:
  """Runs the pipeline to completion; returns the metadata it wrote."""
  require_beam()
  log(f"create_pretraining_data: {len(prepared.files)} input files, Apache "
      f"Beam {runner} ({num_workers} worker(s)) -> {prepared.output_dir}")
  pipeline = beam.Pipeline(
      runner=beam_runner.runner(runner),
      options=beam_runner.pipeline_options(runner, num_workers, beam_args))
  build_pipeline(pipeline, prepared, staging)
  beam_runner.run_to_completion(pipeline, runner)
  meta_path = fileio.join(staging, pretraining_record_format.METADATA_FILE)
  if not fileio.exists(meta_path):
    raise errors.RemBertError(
        f"the Beam pipeline ({runner}) finished without writing {meta_path}; "
        "see the runner's logs.")
  meta = fileio.read_json(meta_path)
  for lang, m in sorted(meta["languages"].items()):
    log(f"  {lang}: {m['input_bytes']:,} bytes, sampling "
        f"q={m['sampling_probability']:.3f}, passes per document "
        f"{m['passes_per_document']:.2f}, {m['sequences']} sequences")
  return meta
