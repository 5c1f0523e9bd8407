"""Pre-training records on Apache Beam: the local tool's records, at Wikipedia / mC4 scale.

`create_pretraining_data(..., runner="DataflowRunner")` (or `--runner` on the
command line) runs the same steps as the local multiprocess engine as a Beam
pipeline, so it runs on Dataflow, Flink, Spark or Beam's local runner:

1. **First pass**: bytes of input per language
   (`text_inputs.file_language_bytes`, one element per input file), summed
   per language; the smoothed language plan
   (`pretraining_instances.plan_languages`) is computed from that sum.
2. **Read**: input files are spread over the workers; each becomes chunks of
   `DOCUMENTS_PER_CHUNK` documents, numbered in file order. With fewer than
   `SPREAD_CHUNKS_BELOW_FILES` files the chunks are redistributed too
   (`Reshuffle`), so a few large files still use every worker.
3. **Records**: `pretraining_instances.chunk_records` tokenises, packs, masks
   and encodes a chunk with the chunk's own generator (seed, file, chunk) and
   gives every record its shard, exactly as a local worker does; a chunk's
   records go on as one element per shard.
4. **Shards**: records are grouped by shard, put back in (file, chunk, record)
   order, shuffled with `shard_permutation`, framed and written; then
   `metadata.json` is built by `build_metadata` from the per-file counts.

Hence, for a seed, every shard and metadata.json are byte-identical to the
local tool's, whatever the runner or the worker count. Everything is written
into the caller's staging directory
(`pretraining_record_creation.staged_output`), which is swapped in only after
the pipeline has succeeded. A shard is assembled in
one worker's memory: choose `--num_output_shards` so a shard stays well below
a worker's memory (e.g. 200-500 MB per shard).

Apache Beam is an optional dependency (`pip install 'rembert_tf[beam]'`); this
module is imported only when a runner is asked for. The runner helpers (the
Python local runner for the direct names, one-line failures) are
`beam_runner`'s.

Example (Beam's local runner, two worker processes):
<!-- snippet: not run: needs a corpus, a SentencePiece model and Apache Beam -->
```python
from rembert_tf.data import pretraining_record_creation
meta = pretraining_record_creation.create_pretraining_data(
    ["/tmp/corpus/{lang}/*.txt"], "/tmp/records_beam",
    "/tmp/spm/sentencepiece.model", seq_length=128, num_output_shards=4,
    runner="DirectRunner", num_workers=2)
```
"""
from typing import Any, Callable, Dict, Iterable, List, Sequence, Tuple

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.data import beam_runner
from rembert_tf.data import pretraining_instances
from rembert_tf.data import pretraining_record_format
from rembert_tf.data import text_inputs
from rembert_tf.data import tfrecord_writer

try:
  import apache_beam as beam  # pylint: disable=g-import-not-at-top
except ImportError:  # pragma: no cover - depends on the installation
  beam = None

# With fewer input files than this, chunks are redistributed after reading
# (their text goes through a shuffle) so that a few large files still keep
# every worker busy; with more, whole files are the unit of work (Wikipedia
# extracts and mC4 come as thousands of files).
SPREAD_CHUNKS_BELOW_FILES = 1000


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


class _ReadChunks(beam.DoFn if beam else object):
  """(unit, file) -> (unit, chunk_index, documents); read counts on the side."""

  def __init__(self, keep):
    self._keep = keep

  def process(self, task):
    unit_index, input_file = task
    stats = text_inputs.ReadStats()
    for chunk_index, chunk in pretraining_instances.iter_chunks(
        input_file, stats, self._keep):
      yield unit_index, chunk_index, chunk
    yield beam.pvalue.TaggedOutput(
        "read", (unit_index, input_file.path, stats))


class _ChunkRecords(beam.DoFn if beam else object):
  """(unit, chunk_index, documents) -> (shard, sort key + language + record)."""

  def __init__(self, job: pretraining_instances.RecordJob):
    self._job = job

  def setup(self):
    pretraining_instances.sentencepiece_processor(
        self._job.sentencepiece_model)

  def process(self, element, plan):
    unit_index, chunk_index, chunk = element
    out = pretraining_instances.chunk_records(chunk, unit_index, chunk_index,
                                              plan.passes, self._job)
    # One element per (chunk, shard), records in chunk order: far fewer
    # elements to move than one per record.
    by_shard = {}
    for shard, language, record in zip(out.shards, out.languages, out.records):
      languages, records = by_shard.setdefault(shard, ([], []))
      languages.append(language)
      records.append(record)
    for shard, (languages, records) in sorted(by_shard.items()):
      yield shard, (unit_index, chunk_index, languages, records)
    yield beam.pvalue.TaggedOutput("counts", (unit_index, out.counts))


def _merge_counts(many: Iterable[Dict[str, List[int]]]) -> Dict[str, List[int]]:
  merged: Dict[str, List[int]] = {}
  for counts in many:
    for language, values in counts.items():
      mine = merged.setdefault(language, [0] * len(values))
      for i, n in enumerate(values):
        mine[i] += n
  return merged


def _write_shard(element, staging: str, seed: int, num_shards: int
                 ) -> Dict[str, Any]:
  """Puts a shard's records in the local tool's order, shuffles and writes them."""
  shard_index, values = element
  batches = sorted((v for v in values if v is not None),
                   key=lambda v: (v[0], v[1]))  # (unit, chunk): unique keys.
  records: List[bytes] = []
  per_language: Dict[str, int] = {}
  for _, _, languages, batch in batches:
    records.extend(batch)
    for language in languages:
      per_language[language] = per_language.get(language, 0) + 1
  order = pretraining_instances.shard_permutation(seed, shard_index,
                                                  len(records))
  name = pretraining_record_format.shard_file_name(shard_index, num_shards)
  tfrecord_writer.write_tfrecord_file(
      fileio.join(staging, name), (records[i] for i in order))
  return pretraining_instances.shard_metadata(shard_index, num_shards,
                                              per_language)


def _write_metadata(unused, plan, read, counts, shards, prepared, staging):
  results = {}
  for unit_index, path, stats in read:
    results[unit_index] = pretraining_instances.UnitResult(unit_index, path,
                                                           stats)
  for unit_index, unit_counts in counts:
    for language, values in unit_counts.items():
      results[unit_index].add_counts(language, values)
  meta = pretraining_instances.build_metadata(
      inputs=prepared.inputs, files=prepared.files, plan=plan,
      results=[results[k] for k in sorted(results)],
      shard_meta=sorted(shards, key=lambda s: s["file"]), job=prepared.job,
      sentencepiece_sha256=prepared.sentencepiece_sha256)
  fileio.write_json(
      fileio.join(staging, pretraining_record_format.METADATA_FILE), meta)
  return meta["num_examples"]


def build_pipeline(pipeline, prepared: "pretraining_instances.Prepared",
                   staging: str) -> None:
  """Adds the record-creation transforms to `pipeline` (see module doc)."""
  options = prepared.job.options
  keep = prepared.languages
  num_shards = options.num_output_shards
  every_file = pipeline | "Files" >> beam.Create(list(enumerate(prepared.files)))
  sizes = (every_file
           | "LanguageBytes" >> beam.FlatMap(_language_bytes, keep)
           | "SumBytes" >> beam.CombinePerKey(sum))
  plan = (pipeline
          | "PlanSeed" >> beam.Create([None])
          | "Plan" >> beam.Map(_plan, beam.pvalue.AsList(sizes),
                               options.language_sampling_alpha,
                               options.dupe_factor, prepared.inputs))
  read = (pipeline
          | "Units" >> beam.Create(prepared.tasks)
          | "SpreadUnits" >> beam.Reshuffle()
          | "Read" >> beam.ParDo(_ReadChunks(keep)).with_output_types(
              Any).with_outputs(
              "read", main="chunks"))
  chunks = read.chunks
  if len(prepared.tasks) < SPREAD_CHUNKS_BELOW_FILES:
    chunks = chunks | "SpreadChunks" >> beam.Reshuffle()
  processed = (chunks
               | "Records" >> beam.ParDo(
                   _ChunkRecords(prepared.job),
                   beam.pvalue.AsSingleton(plan)).with_output_types(
                       Tuple[int, Any]).with_outputs(
                       "counts", main="records"))
  unit_counts = (processed.counts
                 | "CountsPerFile" >> beam.CombinePerKey(_merge_counts))
  every_shard = pipeline | "ShardIndexes" >> beam.Create(
      [(k, None) for k in range(num_shards)]).with_output_types(Tuple[int, Any])
  shards = ((processed.records, every_shard)
            | "WithEmptyShards" >> beam.Flatten()
            | "GroupByShard" >> beam.GroupByKey()
            | "WriteShards" >> beam.Map(_write_shard, staging, options.seed,
                                        num_shards))
  _ = (pipeline
       | "MetadataSeed" >> beam.Create([None])
       | "WriteMetadata" >> beam.Map(
           _write_metadata, beam.pvalue.AsSingleton(plan),
           beam.pvalue.AsList(read.read), beam.pvalue.AsList(unit_counts),
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
