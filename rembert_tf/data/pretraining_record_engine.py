"""The record engine: the steps of one input file and of one shard, run locally.

A unit (one input file) becomes framed records per output shard
(`unit_records`, on `pretraining_instances`' steps); a shard is its records
in unit order, shuffled (`write_shard`); then metadata.json. Worker
processes (`common.worker_pool`, `spawn`) import neither TensorFlow nor
protobuf: they encode with `example_encoding` and frame with
`tfrecord_writer` into local spill files the parent concatenates.
`beam_pretraining_records` runs the same steps as a Beam pipeline.

Example:
<!-- snippet: not run: needs a corpus and a SentencePiece model -->
```python
from rembert_tf.data import pretraining_record_engine, pretraining_instances
prepared = pretraining_instances.prepare(
    ["/tmp/corpus/{lang}/*.txt"], "/tmp/records",
    "/tmp/spm/sentencepiece.model", pretraining_instances.RecordOptions())
meta = pretraining_record_engine.create_records(
    prepared, "/tmp/staging", num_workers=2, log=print)
```
"""
import concurrent.futures
import io
import multiprocessing
import queue
import threading
import time
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional,
                    Sequence, Tuple)

from rembert_tf.common import console
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.common import worker_pool
from rembert_tf.data import pretraining_instances
from rembert_tf.data import pretraining_record_format
from rembert_tf.data import text_inputs
from rembert_tf.data import tfrecord_writer


class _ShardSpill:
  """Per-unit local temporary files, one per output shard, of framed records."""

  def __init__(self, spill_dir: str, unit_index: int, num_shards: int):
    self._paths = [spill_path(spill_dir, unit_index, k)
                   for k in range(num_shards)]
    self._pending: List[bytes] = []
    self._pending_shards: List[int] = []
    self._pending_bytes = 0
    self._files = [None] * num_shards

  def add(self, shard: int, record: bytes):
    self._pending.append(record)
    self._pending_shards.append(shard)
    self._pending_bytes += len(record)
    if self._pending_bytes > (8 << 20):
      self._flush()

  def _flush(self):
    framed = tfrecord_writer.frame_each(self._pending)
    by_shard: Dict[int, List[bytes]] = {}
    for shard, data in zip(self._pending_shards, framed):
      by_shard.setdefault(shard, []).append(data)
    for shard, chunks in sorted(by_shard.items()):
      if self._files[shard] is None:
        self._files[shard] = fileio.open_file(self._paths[shard], "wb")
      self._files[shard].write(b"".join(chunks))
    self._pending, self._pending_shards, self._pending_bytes = [], [], 0

  def close(self):
    if self._pending:
      self._flush()
    for f in self._files:
      if f is not None:
        f.close()


def spill_path(spill_dir: str, unit_index: int, shard: int) -> str:
  return fileio.join(spill_dir, f"unit-{unit_index:06d}.shard-{shard:05d}")


def _spilled(spill_dir: str,
             results: Sequence[pretraining_instances.UnitResult],
             shard: int) -> List[bytes]:
  """One shard's framed records, in unit order."""
  framed = []
  for r in results:
    path = spill_path(spill_dir, r.unit_index, shard)
    if fileio.exists(path):
      framed.extend(tfrecord_writer.split_framed(fileio.read_bytes(path)))
  return framed


def unit_records(unit_index: int, input_file: text_inputs.InputFile,
                 passes: Mapping[str, float],
                 job: pretraining_instances.RecordJob,
                 result: pretraining_instances.UnitResult,
                 keep: Optional[Sequence[str]] = None
                 ) -> Iterator[Tuple[int, bytes]]:
  """(shard, record) of one input file, in order; its counts go to `result`."""
  try:
    for chunk_index, chunk in pretraining_instances.iter_chunks(
        input_file, result.read, keep):
      out = pretraining_instances.chunk_records(chunk, unit_index, chunk_index,
                                                passes, job)
      for language, counts in out.counts.items():
        result.add_counts(language, counts)
      for shard, language, record in zip(out.shards, out.languages, out.records):
        per_language = result.shard_languages.setdefault(shard, {})
        per_language[language] = per_language.get(language, 0) + 1
        yield shard, record
  except (OSError, EOFError, UnicodeError) as e:
    # A corrupt file (a cut gzip, bad bytes): one line naming it, also when
    # it is raised in a worker process. A full disk is the spill's, not the file's.
    if fileio.is_disk_full(e):
      raise
    raise text_inputs.TextInputError(
        f"{input_file.path}: reading it failed ({errors.one_line(e)}); fix or "
        "remove the file.") from None


def process_unit(unit_index: int, input_file: text_inputs.InputFile,
                 passes: Mapping[str, float],
                 job: pretraining_instances.RecordJob, spill_dir: str,
                 keep: Optional[Sequence[str]] = None,
                 progress: Optional[Callable[[int, int, int], None]] = None
                 ) -> pretraining_instances.UnitResult:
  """All records of one input file, spilled per shard (runs in a worker)."""
  result = pretraining_instances.UnitResult(unit_index, input_file.path)
  spill = _ShardSpill(spill_dir, unit_index, job.options.num_output_shards)
  reported = [0, 0, 0]
  last_report = time.time()

  def report():
    now = [result.count("documents"), result.count("sequences"),
           result.count("tokens")]
    progress(*[n - before for n, before in zip(now, reported)])
    reported[:] = now
  try:
    for shard, record in unit_records(unit_index, input_file, passes, job,
                                      result, keep):
      spill.add(shard, record)
      if progress is not None and time.time() - last_report > 0.5:
        report()
        last_report = time.time()
  finally:
    spill.close()
  if progress is not None:
    report()
  return result


_WORKER_QUEUE = None


def _init_worker(progress_queue):
  global _WORKER_QUEUE
  _WORKER_QUEUE = progress_queue


def _worker_progress(documents, sequences, tokens):
  _WORKER_QUEUE.put((documents, sequences, tokens))


def _run_unit(task):
  return process_unit(*task, progress=_worker_progress)


class _Progress:
  """A progress bar over the input files (`console.Progress`, ETA included),
  with documents, sequences and tokens/s as its note; silent unless verbose."""

  def __init__(self, total_units: int, verbose: bool):
    self.documents = self.sequences = self.tokens = 0
    self.start = time.time()
    self._lock = threading.Lock()
    self.bar = console.Progress(
        "create_pretraining_data", total=total_units, unit="files",
        stream=None if verbose else io.StringIO())

  def add(self, documents, sequences, tokens):
    with self._lock:
      self.documents += documents
      self.sequences += sequences
      self.tokens += tokens
      rate = self.tokens / max(time.time() - self.start, 1e-9)
      note = (f"{self.documents:,} documents, {self.sequences:,} sequences, "
              f"{rate:,.0f} tokens/s")
    self.bar.set(None, note=note)

  def file_done(self):
    self.bar.update(1)

  def close(self):
    self.bar.close()


def _run_tasks(tasks, num_workers: int, progress: _Progress
               ) -> List[pretraining_instances.UnitResult]:
  if num_workers == 1 or len(tasks) <= 1:
    results = []
    for task in tasks:
      results.append(process_unit(*task, progress=progress.add))
      progress.file_done()
    return results
  context = multiprocessing.get_context("spawn")
  progress_queue = context.Queue()
  results = []
  with worker_pool.pool(num_workers, "create_pretraining_data",
                        initializer=_init_worker,
                        initargs=(progress_queue,)) as pool:
    pending = [pool.submit(_run_unit, task) for task in tasks]
    done = threading.Event()

    def drain():
      while not done.is_set() or not progress_queue.empty():
        try:
          progress.add(*progress_queue.get(timeout=0.2))
        except queue.Empty:
          continue
    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    try:
      for future in concurrent.futures.as_completed(pending):
        results.append(future.result())
        progress.file_done()
    finally:
      done.set()
      thread.join()
  return results


def write_shard(shard_index: int, framed: List[bytes],
                results: Sequence[pretraining_instances.UnitResult],
                staging: str, options: pretraining_instances.RecordOptions
                ) -> Dict[str, Any]:
  """Writes one shard: its framed records (in unit order) shuffled by
  `shard_permutation`; returns its metadata entry."""
  per_language: Dict[str, int] = {}
  for r in results:
    for language, n in r.shard_languages.get(shard_index, {}).items():
      per_language[language] = per_language.get(language, 0) + n
  order = pretraining_instances.shard_permutation(options.seed, shard_index,
                                                  len(framed))
  num_shards = options.num_output_shards
  name = pretraining_record_format.shard_file_name(shard_index, num_shards)
  tfrecord_writer.write_framed_file(fileio.join(staging, name),
                                    (framed[i] for i in order))
  return pretraining_instances.shard_metadata(shard_index, num_shards,
                                              per_language)


def write_metadata(prepared: pretraining_instances.Prepared,
                   plan: pretraining_instances.Plan,
                   results: Sequence[pretraining_instances.UnitResult],
                   shard_meta: Sequence[Dict[str, Any]], staging: str
                   ) -> Dict[str, Any]:
  """metadata.json of the records in `staging` (results in unit order)."""
  meta = pretraining_instances.build_metadata(
      inputs=prepared.inputs, files=prepared.files, plan=plan,
      results=results, shard_meta=shard_meta, job=prepared.job,
      sentencepiece_sha256=prepared.sentencepiece_sha256)
  fileio.write_json(
      fileio.join(staging, pretraining_record_format.METADATA_FILE), meta)
  return meta


def _local_spill_directory(staging: str):
  """Workers' temporary files: in the staging directory when it is local."""
  if fileio.is_remote(staging):
    # Owner-tagged: a killed run's spill is removed by the next run.
    return outputs.local_scratch_dir("rembert_tf-spill-")
  path = fileio.join(staging, "spill")
  fileio.makedirs(path)
  return _Existing(path)


class _Existing:
  def __init__(self, path):
    self.path = path

  def __enter__(self):
    return self.path

  def __exit__(self, *unused):
    fileio.rmtree(self.path)
    return False


def create_records(prepared: pretraining_instances.Prepared, staging: str,
                   num_workers: int, log, verbose: bool = True
                   ) -> Dict[str, Any]:
  """Plans the language mix (first pass) and writes the records into `staging`."""
  options = prepared.job.options
  plan = pretraining_instances.plan_languages(
      text_inputs.language_sizes(prepared.files, prepared.languages),
      options.language_sampling_alpha, options.dupe_factor, prepared.inputs)
  pretraining_instances.log_plan(log, prepared, plan,
                                 f"{num_workers} worker(s)")
  return run_local(prepared, plan, staging, num_workers, log, verbose)


def run_local(prepared: pretraining_instances.Prepared,
              plan: pretraining_instances.Plan, staging: str, num_workers: int,
              log, verbose: bool = True) -> Dict[str, Any]:
  """The multiprocess engine: records and metadata.json into `staging`."""
  options = prepared.job.options
  with _local_spill_directory(staging) as spill_dir:
    tasks = [(i, f, plan.passes, prepared.job, spill_dir, prepared.languages)
             for i, f in prepared.tasks]
    progress = _Progress(len(tasks), verbose)
    results = _run_tasks(tasks, num_workers, progress)
    if sum(r.count("sequences") for r in results) == 0:
      pretraining_instances.check_has_sequences({"num_examples": 0},
                                                prepared.inputs)
    progress.close()  # Only on success: an error stays the last line.
    results.sort(key=lambda r: r.unit_index)
    log(f"create_pretraining_data: writing {options.num_output_shards} shards")
    shard_meta = [write_shard(k, _spilled(spill_dir, results, k), results,
                              staging, options)
                  for k in range(options.num_output_shards)]
  return write_metadata(prepared, plan, results, shard_meta, staging)
