"""Raw multilingual text -> sharded pre-training TFRecords + metadata.json.

`create_pretraining_data` (the `rembert-create-pretraining-data` command)
checks the flags, model, inputs and output before any work, then runs three
`data_engine` steps, in local worker processes or as one Apache Beam pipeline
(`runner=`): the bytes per language of each input file (the language plan),
each input file's records spilled per output shard (`process_unit`), and each
shard's records in file order, shuffled (`write_shard`), then metadata.json.
Workers import neither TensorFlow nor protobuf (`example_encoding`,
`tfrecord_writer`). Records are written into a staging directory inside the
output directory and swapped in when complete (`staged_records`), also by
`write_pretraining_records`, which makes records of token ids (fixtures).

Example:
```python
from rembert_tf.data import pretraining_record_creation
meta = pretraining_record_creation.write_pretraining_records(
    "records", [[10, 11, 12, 13], [20, 21, 22]] * 32,
    seq_length=16, max_predictions_per_seq=4, vocab_size=2000, num_shards=2)
```
"""
import collections
import contextlib
import functools
import io
import itertools
import time
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence

import numpy as np

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import local_files
from rembert_tf.common import outputs
from rembert_tf.common import progress
from rembert_tf.data import data_engine
from rembert_tf.data import pretraining_instances
from rembert_tf.data import pretraining_record_format
from rembert_tf.data import text_inputs
from rembert_tf.data import tfds_text_inputs
from rembert_tf.data import tfrecord_writer
from rembert_tf.data import tokenizer

UnitResult = pretraining_instances.UnitResult
METADATA_FILE = pretraining_record_format.METADATA_FILE
_DEFAULT_MASKING = pretraining_record_format.Masking()
# Staging directories: `.create_pretraining_data.tmp-*` (fileio's temporaries).
_STAGING_NAME = "create_pretraining_data"


@outputs.writes_output("output_dir")
def create_pretraining_data(inputs: Sequence[str],
                            output_dir,
                            sentencepiece_model,
                            *,
                            input_format: str = "auto",
                            languages: Optional[Sequence[str]] = None,
                            language_field: Optional[str] = None,
                            tfds: Optional[
                                tfds_text_inputs.TfdsTextOptions] = None,
                            num_workers: int = 1,
                            runner: Optional[str] = None,
                            beam_args: Sequence[str] = (),
                            overwrite: bool = False,
                            verbose: bool = True,
                            **option_fields) -> Dict[str, Any]:
  """Makes pre-training records; returns the metadata written to metadata.json.

  Args:
    inputs: input specs (`text_inputs`, or `tfds:` inputs).
    output_dir: gets `pretrain-XXXXX-of-YYYYY.tfrecord` and metadata.json.
    sentencepiece_model: a model with [CLS], [SEP], [MASK], a padding and an
      unknown piece.
    **option_fields: the fields of `pretraining_instances.RecordOptions`.
    num_workers: processes or Beam workers; the output does not depend on it.
    runner: None (local worker processes) or an Apache Beam runner name, with
      `beam_args` as pipeline options.
  """
  options = pretraining_instances.RecordOptions(**option_fields)
  if num_workers < 1:
    raise errors.UsageError(f"--num_workers must be >= 1, got {num_workers}.")
  log = (functools.partial(print, flush=True) if verbose
         else lambda *unused, **unused_kw: None)
  start = time.time()
  prepared = pretraining_instances.prepare(
      inputs, output_dir, sentencepiece_model, options,
      input_format=input_format, languages=languages,
      language_field=language_field, tfds=tfds)
  if runner:
    data_engine.require_beam()
  with staged_records(prepared.output_dir, overwrite) as staging:
    meta = _create_records(prepared, staging, num_workers, runner, beam_args,
                           log, verbose)
  languages = meta["languages"].values()
  tokens = sum(l["tokens"] for l in languages)
  elapsed = time.time() - start
  log(f"create_pretraining_data: {meta['num_examples']} sequences from "
      f"{sum(l['documents'] for l in languages)} documents, {tokens} tokens "
      f"in {elapsed:.1f}s ({tokens / max(elapsed, 1e-9):,.0f} tokens/s)")
  if meta["languages_without_text"]:
    log("  languages without text: "
        f"{', '.join(meta['languages_without_text'])}")
  return meta


def _create_records(prepared: pretraining_instances.Prepared, staging: str,
                    num_workers: int, runner: Optional[str],
                    beam_args: Sequence[str], log, verbose: bool
                    ) -> Dict[str, Any]:
  """Records and metadata.json into `staging` (the steps of the module doc)."""
  options = prepared.job.options
  engine = (f"Apache Beam {runner} ({num_workers} worker(s))" if runner
            else f"{num_workers} worker(s)")
  bar, on_unit = (None, None) if runner else _progress(len(prepared.tasks),
                                                       verbose)
  with _spill_directory(staging, runner) as spill_dir:
    steps = [
        data_engine.Step("LanguageBytes", prepared.files, functools.partial(
            _language_bytes, keep=prepared.languages), functools.partial(
                _plan, prepared=prepared, log=log, engine=engine)),
        data_engine.Step("Records", prepared.tasks, functools.partial(
            process_unit, job=prepared.job, spill_dir=spill_dir,
            keep=prepared.languages), _with_results, parallel=True,
                         progress=on_unit),
        data_engine.Step("Shards", range(options.num_output_shards),
                         functools.partial(write_shard, staging=staging,
                                           spill_dir=spill_dir,
                                           options=options),
                         functools.partial(_metadata, prepared=prepared,
                                           staging=staging))]
    data_engine.run(steps, num_workers=num_workers, runner=runner,
                    beam_args=beam_args, what="create_pretraining_data")
  meta = fileio.read_json(
      fileio.join(staging, METADATA_FILE))
  if runner:  # The plan was logged on a worker: its outcome here.
    for lang, m in sorted(meta["languages"].items()):
      log(f"  {lang}: {m['input_bytes']:,} bytes, sampling q="
          f"{m['sampling_probability']:.3f}, {m['sequences']} sequences")
  if meta["num_examples"] == 0:
    raise text_inputs.TextInputError(
        f"inputs {prepared.inputs} contain no text (only blank lines or "
        "unparsable JSON); no records written.")
  if bar:
    bar.close()  # Only on success: an error stays the last line.
  return meta


def _spill_directory(staging: str, runner: Optional[str]):
  """Where units spill their records: beside this process, unless remote
  workers write them (then in the staging directory, as when it is local)."""
  on_this_machine = not runner or runner in data_engine.DIRECT_RUNNERS
  if fileio.is_remote(staging) and on_this_machine:
    # Owner-tagged: a killed run's spill is removed by the next run.
    return local_files.local_scratch_dir("rembert_tf-spill-")
  path = fileio.join(staging, "spill")
  fileio.makedirs(path)
  return contextlib.nullcontext(path)  # Goes with the staging directory.


def _language_bytes(input_file, unused_previous, keep):
  return input_file.language_bytes(keep)


def _plan(per_file: List[Dict[str, int]], unused_previous, prepared, log,
          engine: str) -> pretraining_instances.Plan:
  sizes = collections.Counter()
  for file_sizes in per_file:
    sizes.update(file_sizes)
  options = prepared.job.options
  plan = pretraining_instances.plan_languages(
      sizes, options.language_sampling_alpha, options.dupe_factor,
      prepared.inputs)
  log(f"create_pretraining_data: {len(prepared.files)} input files, "
      f"{len(plan.sizes)} languages, {engine} -> {prepared.output_dir}")
  for lang, size in plan.sizes.items():
    if size:
      log(f"  {lang}: {size:,} bytes, sampling "
          f"q={plan.probabilities[lang]:.3f}, passes per document "
          f"{plan.passes[lang]:.2f}")
    else:
      log(f"  {lang}: no text (skipped)")
  return plan


def _with_results(results: List[UnitResult], plan):
  return plan, results


def _metadata(shard_meta, plan_and_results, prepared, staging):
  meta = pretraining_instances.build_metadata(prepared, *plan_and_results,
                                              shard_meta)
  fileio.write_json(
      fileio.join(staging, METADATA_FILE), meta)


def spill_path(spill_dir: str, unit_index: int, shard: int) -> str:
  return fileio.join(spill_dir, f"unit-{unit_index:06d}.shard-{shard:05d}")


class _ShardSpill:
  """A unit's framed records, one file per output shard, written in batches."""

  def __init__(self, spill_dir: str, unit_index: int, num_shards: int):
    self._paths = [spill_path(spill_dir, unit_index, k)
                   for k in range(num_shards)]
    self._pending: List[tuple] = []
    self._pending_bytes = 0
    self._files = [None] * num_shards

  def add(self, shard: int, record: bytes):
    self._pending.append((shard, record))
    self._pending_bytes += len(record)
    if self._pending_bytes > (8 << 20):
      self.flush()

  def flush(self):
    framed = tfrecord_writer.frame_each([r for _, r in self._pending])
    by_shard: Dict[int, List[bytes]] = {}
    for (shard, _), data in zip(self._pending, framed):
      by_shard.setdefault(shard, []).append(data)
    for shard, chunks in sorted(by_shard.items()):
      if self._files[shard] is None:
        self._files[shard] = fileio.open_file(self._paths[shard], "wb")
      self._files[shard].write(b"".join(chunks))
    self._pending, self._pending_bytes = [], 0

  def close(self):
    self.flush()
    for f in self._files:
      if f is not None:
        f.close()


def process_unit(task, plan: pretraining_instances.Plan, *,
                 job: pretraining_instances.RecordJob, spill_dir: str,
                 keep: Optional[Sequence[str]] = None) -> UnitResult:
  """All records of one input file, spilled per shard; its counts."""
  unit_index, input_file = task
  result = UnitResult(unit_index, input_file.path)
  spill = _ShardSpill(spill_dir, unit_index, job.options.num_output_shards)
  try:
    documents = input_file.language_documents(result.read, keep)
    for chunk_index in itertools.count():
      chunk = list(itertools.islice(
          documents, pretraining_instances.DOCUMENTS_PER_CHUNK))
      if not chunk:
        break
      records, counts = pretraining_instances.chunk_records(
          chunk, unit_index, chunk_index, plan.passes, job)
      result.counts.update(counts)
      for shard, language, record in records:
        per_language = result.shard_languages.setdefault(shard, {})
        per_language[language] = per_language.get(language, 0) + 1
        spill.add(shard, record)
  except (OSError, EOFError, UnicodeError) as e:
    # A corrupt file (a cut gzip, bad bytes): one line naming it, also from a
    # worker process. A full disk is the spill's, not the file's.
    if fileio.is_disk_full(e):
      raise
    raise text_inputs.TextInputError(
        f"{input_file.path}: reading it failed ({errors.one_line(e)}); fix or "
        "remove the file.") from None
  finally:
    spill.close()
  return result


def write_shard(shard_index: int, plan_and_results, *, staging: str,
                spill_dir: str, options: pretraining_instances.RecordOptions
                ) -> Dict[str, Any]:
  """Writes one shard: its records in unit order, shuffled by
  `shard_permutation`; returns its metadata entry."""
  _, results = plan_and_results
  framed, per_language = [], {}
  for r in results:
    path = spill_path(spill_dir, r.unit_index, shard_index)
    if fileio.exists(path):
      framed.extend(tfrecord_writer.split_framed(fileio.read_bytes(path)))
    for language, n in r.shard_languages.get(shard_index, {}).items():
      per_language[language] = per_language.get(language, 0) + n
  order = pretraining_instances.shard_permutation(options.seed, shard_index,
                                                  len(framed))
  name = pretraining_record_format.shard_file_name(shard_index,
                                                   options.num_output_shards)
  tfrecord_writer.write_framed_file(fileio.join(staging, name),
                                    (framed[i] for i in order))
  return {"file": name, "num_examples": int(sum(per_language.values())),
          "num_examples_per_language": dict(sorted(
              (l, int(n)) for l, n in per_language.items() if n))}


def _progress(total_units: int, verbose: bool):
  """The console's progress over the input files (silent unless verbose),
  and its update by a unit's result: documents, sequences, tokens/s."""
  bar = progress.Progress("create_pretraining_data", total=total_units,
                          unit="files",
                          stream=None if verbose else io.StringIO())
  done, start = collections.Counter(), time.time()

  def update(result: UnitResult):
    for name in ("documents", "sequences", "tokens"):
      done[name] += result.count(name)
    rate = done["tokens"] / max(time.time() - start, 1e-9)
    bar.update(1, note=f"{done['documents']:,} documents, "
               f"{done['sequences']:,} sequences, {rate:,.0f} tokens/s")
  return bar, update


# --- Staging ---------------------------------------------------------------


def existing_records(directory) -> List[str]:
  """Names of the record shards and metadata in `directory` (what a new run
  replaces)."""
  if not fileio.isdir(directory):
    return []
  return [name for name in fileio.listdir(directory)
          if name.endswith(pretraining_record_format.RECORD_SUFFIX)
          or name == METADATA_FILE]


def swap_in_records(staging: str, directory) -> None:
  """Replaces the records of `directory` by those in `staging` (other files
  kept; metadata.json leaves first and comes back last, `outputs.swap_in`)."""
  directory = fileio.as_str(directory).rstrip("/")
  old_files = sorted(existing_records(directory), key=lambda n: n != METADATA_FILE)
  new_files = sorted(existing_records(staging), key=lambda n: n == METADATA_FILE)
  outputs.swap_in(directory, staging, old_files, new_files)


@contextlib.contextmanager
def staged_records(output_dir: str, overwrite: bool) -> Iterator[str]:
  """A staging directory inside `output_dir`, swapped in when the block
  succeeds; on failure it goes (and an output directory it created), the old
  records untouched. First finishes a swap a killed run left, removes the
  staging directories of killed runs (callers hold the output's lock), and
  refuses records already there unless `overwrite` (OutputExistsError)."""
  created = not fileio.exists(output_dir)
  if not created:
    outputs.recover_interrupted_swap(fileio.join(output_dir, _STAGING_NAME),
                                     target=output_dir)
  found = existing_records(output_dir)
  if found and not overwrite:
    listed = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
    raise errors.OutputExistsError(
        f"output directory {output_dir} already holds pre-training records "
        f"({listed}); choose an empty directory or pass --overwrite "
        "(overwrite=True) to replace them (the old records stay until the new "
        "ones are complete).")
  fileio.makedirs(output_dir)
  staging = fileio.temporary_path(fileio.join(output_dir, _STAGING_NAME))
  fileio.makedirs(staging)
  try:
    yield staging
  except BaseException as e:
    fileio.rmtree(staging)
    if created and fileio.isdir(output_dir) and not fileio.listdir(output_dir):
      fileio.rmtree(output_dir)
    if fileio.is_disk_full(e):  # Name the output, not a staging file.
      raise fileio.disk_full_error(output_dir, e) from None
    raise
  swap_in_records(staging, output_dir)


@outputs.writes_output("output_dir")
def write_pretraining_records(
    output_dir,
    examples: Sequence[Sequence[int]],
    *,
    seq_length: int,
    max_predictions_per_seq: int,
    vocab_size: Optional[int] = None,
    special: Optional[tokenizer.SpecialTokens] = None,
    layout: str = pretraining_record_format.LAYOUT_STATIC,
    num_shards: int = 1,
    seed: int = 0,
    masking: pretraining_record_format.Masking = _DEFAULT_MASKING,
    overwrite: bool = False,
    extra_metadata: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
  """Writes already tokenised examples (lists of content token ids, without
  [CLS]/[SEP]) as pre-training shards + metadata.json; returns the metadata.

  The special ids are the project's layout of `vocab_size` pieces, or
  `special` (e.g. `SpecialTokens.from_model(path)`); the static layout masks
  here (seeded by `seed`), the unmasked one leaves it to the input pipeline.
  """
  if special is None:
    if vocab_size is None:
      raise errors.UsageError("write_pretraining_records needs vocab_size or "
                              "special (the tokenizer's SpecialTokens).")
    special = tokenizer.SpecialTokens(vocab_size=int(vocab_size),
                                      **tokenizer.special_ids())
  meta = pretraining_record_format.base_metadata(
      layout=layout, seq_length=seq_length,
      max_predictions_per_seq=max_predictions_per_seq, special=special,
      masking=masking)
  with staged_records(fileio.as_str(output_dir), overwrite) as staging:
    records = pretraining_record_format.encode_sequences(
        examples, seq_length=seq_length,
        max_predictions_per_seq=max_predictions_per_seq, special=special,
        rng=np.random.default_rng(seed), layout=layout, masking=masking)
    meta["num_examples"] = len(records)
    meta["shards"] = []
    for index in range(num_shards):  # Dealt round-robin.
      name = pretraining_record_format.shard_file_name(index, num_shards)
      count = tfrecord_writer.write_tfrecord_file(
          fileio.join(staging, name), records[index::num_shards])
      meta["shards"].append({"file": name, "num_examples": count})
    meta["seed"] = seed
    meta.update(extra_metadata or {})
    fileio.write_json(fileio.join(staging, METADATA_FILE), meta)
  return meta
