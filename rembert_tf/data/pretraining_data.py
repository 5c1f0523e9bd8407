"""Raw multilingual text -> sharded pre-training TFRecords + metadata.json.

Pipeline (library entry point `create_pretraining_data`, wrapped by
`tools/create_pretraining_data.py`):

1. Inputs are resolved to (language, file) pairs (`text_inputs`); each input
   file is one unit of work, numbered in sorted order.
2. Languages are mixed by smoothed sampling: with p_l the byte share of
   language l and q_l ~ p_l**alpha, every document of l is processed
   r_l = dupe_factor * (q_l / p_l) / min_k(q_k / p_k) times on average (the
   largest language exactly `dupe_factor` times, smaller ones more: nothing is
   dropped, low-resource languages are upsampled). The fractional part of r_l
   is a per-document coin flip.
3. A document's lines are tokenised once with SentencePiece; each pass packs
   consecutive lines into `[CLS] tokens [SEP]` sequences of up to
   seq_length - 2 tokens (with probability `short_seq_prob` a shorter random
   target length, as BERT does); a line longer than a sequence is split, never
   dropped. Static masking (BERT 80/10/10, see `pretraining_records`) or the
   unmasked layout (`unmasked=True`) for dynamic masking in the input pipeline.
4. Every sequence goes to a random output shard; each shard is shuffled.

Determinism: documents of a file are processed in fixed chunks of
DOCUMENTS_PER_CHUNK; all randomness of a chunk (passes, packing, masking,
shard choice) comes from `numpy.random.default_rng([seed, unit_index,
chunk_index])`, and shards are assembled in unit order and shuffled with
`[seed, shard_index]`; so the records are byte-identical for a seed whatever
`num_workers` is. Masking and Example encoding run vectorised over a chunk.

Worker processes (`spawn`) import neither TensorFlow nor protobuf: they encode
Examples with `example_encoding` and frame them as TFRecords (numpy CRC32C,
`tfrecord_writer`) into per-unit local temporary files; the parent shuffles and
concatenates them into `pretrain-XXXXX-of-YYYYY.tfrecord` shards and
`metadata.json`, all in a staging directory `.create_pretraining_data.tmp-*`
inside the output directory, then swaps them in (`pretraining_records.
swap_in_records`): old records stay until the new ones are complete, a failed
run removes its staging directory, and the next run removes one a killed run
left. A directory that already holds records is refused unless
`overwrite=True`. The output may be on any filesystem (`gs://`).

The same steps are the transforms of the Apache Beam pipeline
(`beam_pretraining_data`): `chunk_records`, `shard_permutation` and
`build_metadata` are shared, so both write the same bytes for a seed.

Compared with Model Garden's `official/nlp/data/create_pretraining_data.py`
(which this follows for masking and packing): no next-sentence pairs (RemBERT
is MLM-only), language-smoothed mixing, multi-process work split with
worker-count-independent output, and vectorised masking / encoding.

Example:
```python
from rembert_tf.data import pretraining_data
meta = pretraining_data.create_pretraining_data(
    inputs=["/tmp/corpus/{lang}/*.txt"], output_dir="/tmp/records",
    sentencepiece_model="/tmp/spm/sentencepiece.model",
    options=pretraining_data.RecordOptions(seq_length=128,
                                           max_predictions_per_seq=20,
                                           num_output_shards=4),
    num_workers=2)
print(meta["num_examples"], meta["languages"]["en"]["sequences"])
```
"""
import dataclasses
import io
import itertools
import multiprocessing
import queue
import tempfile
import threading
import time
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional,
                    Sequence, Tuple)

import numpy as np

from rembert_tf.common import console
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.data import pretraining_records
from rembert_tf.data import text_inputs
from rembert_tf.data import tfrecord_writer
from rembert_tf.data import tokenizer

# Documents whose records are masked and encoded together (one RNG each).
DOCUMENTS_PER_CHUNK = 256
MAX_SEQ_LENGTH = 8192
# Seeds the shard shuffles apart from the chunks' generators.
_SHARD_SHUFFLE_STREAM = 1_000_003

Masking = pretraining_records.Masking


@dataclasses.dataclass(frozen=True)
class RecordOptions:
  """Every setting that decides the records (besides the inputs and the model)."""
  seq_length: int = 128
  max_predictions_per_seq: int = 20
  masking: Masking = Masking()
  dupe_factor: int = 1
  short_seq_prob: float = 0.1
  unmasked: bool = False
  language_sampling_alpha: float = 0.7
  num_output_shards: int = 8
  seed: int = 12345

  @property
  def layout(self) -> str:
    return (pretraining_records.LAYOUT_UNMASKED if self.unmasked
            else pretraining_records.LAYOUT_STATIC)

  def check(self) -> "RecordOptions":
    """Raises errors.UsageError naming the flag that is out of range."""
    if not 3 <= self.seq_length <= MAX_SEQ_LENGTH:
      raise errors.UsageError(
          f"--seq_length must be in [3, {MAX_SEQ_LENGTH}] ([CLS] + at least one "
          f"token + [SEP]), got {self.seq_length}.")
    if not 1 <= self.max_predictions_per_seq <= self.seq_length - 2:
      raise errors.UsageError(
          f"--max_predictions_per_seq must be in [1, {self.seq_length - 2}] "
          f"(--seq_length {self.seq_length} minus [CLS] and [SEP]), got "
          f"{self.max_predictions_per_seq}.")
    self.masking.check()
    if self.dupe_factor < 1:
      raise errors.UsageError(
          f"--dupe_factor must be >= 1, got {self.dupe_factor}.")
    if not 0 <= self.short_seq_prob <= 1:
      raise errors.UsageError(
          f"--short_seq_prob must be in [0, 1], got {self.short_seq_prob}.")
    if self.language_sampling_alpha < 0:
      raise errors.UsageError(
          f"--alpha must be >= 0, got {self.language_sampling_alpha}.")
    if not 1 <= self.num_output_shards <= 100_000:
      raise errors.UsageError(
          f"--num_output_shards must be in [1, 100000], got "
          f"{self.num_output_shards}.")
    return self


@dataclasses.dataclass(frozen=True)
class RecordJob:
  """What every worker needs: the options, the model and its special ids."""
  options: RecordOptions
  sentencepiece_model: str
  special: tokenizer.SpecialTokens


@dataclasses.dataclass(frozen=True)
class Plan:
  """The first pass's outcome: input bytes and sampling per language."""
  sizes: Dict[str, int]
  probabilities: Dict[str, float]
  passes: Dict[str, float]


# Per-language counters: documents, lines, tokens, sequences.
_COUNTS = ("documents", "lines", "tokens", "sequences")


@dataclasses.dataclass
class UnitResult:
  """Counts of one unit (input file)."""
  unit_index: int
  path: str
  read: text_inputs.ReadStats = dataclasses.field(
      default_factory=text_inputs.ReadStats)
  languages: Dict[str, List[int]] = dataclasses.field(default_factory=dict)
  shard_languages: Dict[int, Dict[str, int]] = dataclasses.field(
      default_factory=dict)

  def add_counts(self, language: str, counts: Sequence[int]) -> None:
    mine = self.languages.setdefault(language, [0] * len(_COUNTS))
    for i, n in enumerate(counts):
      mine[i] += n

  def count(self, name: str, language: Optional[str] = None) -> int:
    i = _COUNTS.index(name)
    return sum(c[i] for l, c in self.languages.items()
               if language is None or l == language)


@dataclasses.dataclass
class ChunkRecords:
  """The records of one chunk, their shards and languages, and its counts."""
  records: List[bytes]
  shards: List[int]
  languages: List[str]
  counts: Dict[str, List[int]]  # language -> documents, lines, tokens, sequences


def pack_document(lines_ids: Sequence[Sequence[int]], max_num_tokens: int,
                  short_seq_prob: float, rng: np.random.Generator
                  ) -> List[np.ndarray]:
  """Greedy packing of a document's tokenised lines into sequences.

  Consecutive lines are appended while they fit the target length
  (max_num_tokens, or with probability short_seq_prob a random length in
  [2, max_num_tokens]); a line longer than the target is split into pieces.
  Every token of the document ends up in exactly one sequence.
  """
  def new_target():
    if short_seq_prob > 0 and rng.random() < short_seq_prob:
      return int(rng.integers(2, max_num_tokens + 1))
    return max_num_tokens
  sequences = []
  current: List[Sequence[int]] = []
  current_len = 0
  target = new_target()
  for ids in lines_ids:
    if not len(ids):
      continue
    if current_len and current_len + len(ids) > target:
      sequences.append(np.concatenate(current))
      current, current_len = [], 0
      target = new_target()
    start = 0
    while len(ids) - start > target - current_len:
      take = target - current_len
      current.append(ids[start:start + take])
      sequences.append(np.concatenate(current))
      current, current_len = [], 0
      start += take
      target = new_target()
    if start < len(ids):
      current.append(ids[start:])
      current_len += len(ids) - start
  if current_len:
    sequences.append(np.concatenate(current))
  return sequences


# ----------------------------------------------------------------------------
# The steps both engines share (local processes and Beam).

def plan_languages(sizes: Dict[str, int], alpha: float, dupe_factor: int,
                   inputs: Sequence[str]) -> Plan:
  """Smoothed sampling from the first pass's bytes per language."""
  if not sizes or all(n == 0 for n in sizes.values()):
    raise text_inputs.InputError(
        f"inputs {list(inputs)}: every input file is empty; there is no text.")
  sizes = dict(sorted(sizes.items()))  # Float sums in one order everywhere.
  return Plan(sizes=sizes,
              probabilities=text_inputs.smoothed_language_probabilities(
                  sizes, alpha),
              passes=passes_per_document(sizes, alpha, dupe_factor))


def passes_per_document(sizes: Dict[str, int], alpha: float,
                        dupe_factor: int) -> Dict[str, float]:
  """r_l: how often each document of language l is used (see module doc)."""
  q = text_inputs.smoothed_language_probabilities(sizes, alpha)
  total = float(sum(sizes.values()))
  ratio = {l: q[l] / (n / total) for l, n in sizes.items() if n > 0}
  base = min(ratio.values())
  return {l: dupe_factor * r / base for l, r in ratio.items()}


def iter_chunks(input_file: text_inputs.InputFile,
                stats: text_inputs.ReadStats,
                keep: Optional[Sequence[str]] = None
                ) -> Iterator[Tuple[int, List[Tuple[str, List[str]]]]]:
  """(chunk_index, [(language, lines), ...]) of DOCUMENTS_PER_CHUNK documents."""
  documents = text_inputs.iter_language_documents(input_file, stats, keep)
  for chunk_index in itertools.count():
    chunk = list(itertools.islice(documents, DOCUMENTS_PER_CHUNK))
    if not chunk:
      return
    yield chunk_index, chunk


_PROCESSOR_CACHE: Dict[str, Any] = {}


def sentencepiece_processor(path: str):
  """The model loaded once per process (workers reuse it for every chunk)."""
  if path not in _PROCESSOR_CACHE:
    _PROCESSOR_CACHE[path] = tokenizer.load_sentencepiece(path)
  return _PROCESSOR_CACHE[path]


def chunk_records(chunk: Sequence[Tuple[str, List[str]]], unit_index: int,
                  chunk_index: int, passes: Mapping[str, float],
                  job: RecordJob) -> ChunkRecords:
  """Tokenises, packs, masks and encodes one chunk; assigns each record a shard.

  All randomness of a chunk (a fixed run of documents of one file) comes from
  its own generator, seeded by (seed, unit, chunk): the result does not depend
  on which process or Beam worker runs it.
  """
  options = job.options
  sp = sentencepiece_processor(job.sentencepiece_model)
  flat = [line for _, lines in chunk for line in lines]
  flat_ids = sp.encode(flat, num_threads=1)
  rng = np.random.default_rng([options.seed, unit_index, chunk_index])
  contents, languages = [], []
  counts: Dict[str, List[int]] = {}
  start = 0
  for language, lines in chunk:
    lines_ids = flat_ids[start:start + len(lines)]
    start += len(lines)
    passes_l = passes.get(language, 0.0)
    whole = int(np.floor(passes_l))
    num_passes = whole + int(rng.random() < passes_l - whole)
    mine = counts.setdefault(language, [0, 0, 0, 0])
    mine[0] += 1
    mine[1] += len(lines)
    mine[2] += sum(len(ids) for ids in lines_ids)
    for _ in range(num_passes):
      packed = pack_document(lines_ids, options.seq_length - 2,
                             options.short_seq_prob, rng)
      contents.extend(packed)
      languages.extend([language] * len(packed))
      mine[3] += len(packed)
  records = pretraining_records.encode_sequences(
      contents, seq_length=options.seq_length,
      max_predictions_per_seq=options.max_predictions_per_seq,
      special=job.special, rng=rng, layout=options.layout,
      masking=options.masking)
  shards = rng.integers(options.num_output_shards, size=len(records)).tolist()
  return ChunkRecords(records, shards, languages, counts)


def shard_permutation(seed: int, shard_index: int, num_records: int
                      ) -> np.ndarray:
  """The order of a shard's records (given in unit, chunk, record order)."""
  return np.random.default_rng([seed, _SHARD_SHUFFLE_STREAM, shard_index]
                               ).permutation(num_records)


def shard_metadata(shard_index: int, num_shards: int,
                   languages: Mapping[str, int]) -> Dict[str, Any]:
  return {"file": pretraining_records.shard_file_name(shard_index, num_shards),
          "num_examples": int(sum(languages.values())),
          "num_examples_per_language": dict(sorted(
              (l, int(n)) for l, n in languages.items() if n))}


def build_metadata(*, inputs: Sequence[str], files: Sequence[text_inputs.InputFile],
                   plan: Plan, results: Sequence[UnitResult],
                   shard_meta: Sequence[Dict[str, Any]], job: RecordJob,
                   sentencepiece_sha256: str) -> Dict[str, Any]:
  """metadata.json of a record directory (the same for both engines)."""
  options = job.options
  meta = pretraining_records.base_metadata(
      layout=options.layout, seq_length=options.seq_length,
      max_predictions_per_seq=options.max_predictions_per_seq,
      special=job.special, masking=options.masking)
  meta["masking"].update(dupe_factor=options.dupe_factor,
                         short_seq_prob=options.short_seq_prob)
  meta["num_examples"] = int(sum(s["num_examples"] for s in shard_meta))
  meta["shards"] = list(shard_meta)
  by_path = {r.path: r for r in results}
  total_bytes = sum(plan.sizes.values())
  languages_meta = {}
  for lang in sorted(plan.sizes):
    path_files = [f for f in files if f.language == lang and
                  f.languages_known_from_path]
    path_results = [by_path[f.path] for f in path_files if f.path in by_path]
    languages_meta[lang] = {
        "input_files": len(path_files),
        "input_bytes": plan.sizes[lang],
        **{name: sum(r.count(name, lang) for r in results) for name in _COUNTS},
        "natural_probability": round(plan.sizes[lang] / total_bytes, 6),
        "sampling_probability": round(plan.probabilities[lang], 6),
        "passes_per_document": round(plan.passes.get(lang, 0.0), 6),
        "invalid_utf8_replacements": sum(
            r.read.invalid_utf8_replacements for r in path_results),
        "skipped_json_lines": sum(r.read.skipped_json_lines
                                  for r in path_results),
    }
  meta["languages"] = languages_meta
  meta["languages_without_text"] = sorted(
      l for l, m in languages_meta.items() if m["documents"] == 0)
  meta["inputs"] = []
  for f in files:
    r = by_path.get(f.path)
    entry = {"path": f.path, "language": f.language or None, "format": f.format,
             "documents": r.count("documents") if r else 0,
             "sequences": r.count("sequences") if r else 0}
    if f.language_field:
      entry["language_field"] = f.language_field
    if r and not f.languages_known_from_path:
      entry["invalid_utf8_replacements"] = r.read.invalid_utf8_replacements
      entry["skipped_json_lines"] = r.read.skipped_json_lines
    meta["inputs"].append(entry)
  meta["tokenizer"] = {"sentencepiece_model": job.sentencepiece_model,
                       "sha256": sentencepiece_sha256,
                       "vocab_size": job.special.vocab_size}
  meta["sentencepiece_sha256"] = sentencepiece_sha256
  meta["language_sampling_alpha"] = options.language_sampling_alpha
  meta["seed"] = options.seed
  return meta


# ----------------------------------------------------------------------------
# The local engine: one process per input file.

class _ShardSpill:
  """Per-unit local temporary files, one per output shard, of framed records.

  Records are framed (CRCs computed) here, in the worker, so the parent only
  shuffles and concatenates.
  """

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


def read_spill(path: str) -> List[bytes]:
  if not fileio.exists(path):
    return []
  return tfrecord_writer.split_framed(fileio.read_bytes(path))


def process_unit(unit_index: int, input_file: text_inputs.InputFile,
                 passes: Mapping[str, float], job: RecordJob, spill_dir: str,
                 keep: Optional[Sequence[str]] = None,
                 progress: Optional[Callable[[int, int, int], None]] = None
                 ) -> UnitResult:
  """All chunks of one input file, spilled per shard (runs in a worker)."""
  result = UnitResult(unit_index, input_file.path)
  spill = _ShardSpill(spill_dir, unit_index, job.options.num_output_shards)
  pending = [0, 0, 0]
  last_report = time.time()
  try:
    for chunk_index, chunk in iter_chunks(input_file, result.read, keep):
      out = chunk_records(chunk, unit_index, chunk_index, passes, job)
      for shard, language, record in zip(out.shards, out.languages, out.records):
        spill.add(shard, record)
        per_language = result.shard_languages.setdefault(shard, {})
        per_language[language] = per_language.get(language, 0) + 1
      for language, counts in out.counts.items():
        result.add_counts(language, counts)
        pending[0] += counts[0]
        pending[2] += counts[2]
      pending[1] += len(out.records)
      if progress is not None and time.time() - last_report > 0.5:
        progress(*pending)
        pending = [0, 0, 0]
        last_report = time.time()
  finally:
    spill.close()
  if progress is not None and any(pending):
    progress(*pending)
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


def _run_tasks(tasks, num_workers: int, progress: _Progress) -> List[UnitResult]:
  if num_workers == 1 or len(tasks) <= 1:
    results = []
    for task in tasks:
      results.append(process_unit(*task, progress=progress.add))
      progress.file_done()
    return results
  context = multiprocessing.get_context("spawn")
  progress_queue = context.Queue()
  results = []
  with context.Pool(num_workers, initializer=_init_worker,
                    initargs=(progress_queue,)) as pool:
    pending = pool.imap_unordered(_run_unit, tasks)
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
      for result in pending:
        results.append(result)
        progress.file_done()
    finally:
      done.set()
      thread.join()
  return results


def _merge_shards(results: List[UnitResult], spill_dir: str, staging: str,
                  options: RecordOptions) -> List[Dict[str, Any]]:
  shard_meta = []
  num_shards = options.num_output_shards
  for k in range(num_shards):
    records = []
    per_language: Dict[str, int] = {}
    for r in results:
      records.extend(read_spill(spill_path(spill_dir, r.unit_index, k)))
      for language, n in r.shard_languages.get(k, {}).items():
        per_language[language] = per_language.get(language, 0) + n
    order = shard_permutation(options.seed, k, len(records))
    name = pretraining_records.shard_file_name(k, num_shards)
    tfrecord_writer.write_framed_file(fileio.join(staging, name),
                                      (records[i] for i in order))
    shard_meta.append(shard_metadata(k, num_shards, per_language))
  return shard_meta


# ----------------------------------------------------------------------------
# The command's steps.

@dataclasses.dataclass
class Prepared:
  """Everything decided before the work starts (flags, model, inputs)."""
  inputs: List[str]
  output_dir: str
  files: List[text_inputs.InputFile]
  job: RecordJob
  sentencepiece_sha256: str
  languages: Optional[List[str]]

  _tasks: Optional[List[Tuple[int, text_inputs.InputFile]]] = None

  @property
  def tasks(self) -> List[Tuple[int, text_inputs.InputFile]]:
    """(unit index, file) of every non-empty input file, in sorted order."""
    if self._tasks is None:  # One size look-up per file (gs:// costs a request).
      self._tasks = [(i, f) for i, f in enumerate(self.files) if f.size() > 0]
    return self._tasks


def prepare(inputs: Sequence[str], output_dir, sentencepiece_model,
            options: RecordOptions, *, input_format: str = "auto",
            languages: Optional[Sequence[str]] = None,
            language_field: Optional[str] = None,
            overwrite: bool = False) -> Prepared:
  """Checks flags, model, inputs and the output before any work starts."""
  options.check()
  output_dir = fileio.as_str(output_dir).rstrip("/")
  model = fileio.as_str(sentencepiece_model)
  special = tokenizer.SpecialTokens.from_model(model)
  sha = tokenizer.read_tokenizer_metadata(model)["sha256"]
  files = text_inputs.resolve_inputs(inputs, input_format, languages,
                                     language_field)
  fileio.check_output_location(output_dir)
  pretraining_records.refuse_existing_records(output_dir, overwrite)
  prepared = Prepared(inputs=list(inputs), output_dir=output_dir, files=files,
                      job=RecordJob(options, model, special),
                      sentencepiece_sha256=sha,
                      languages=list(languages) if languages else None)
  if not prepared.tasks:
    plan_languages({}, options.language_sampling_alpha, options.dupe_factor,
                   inputs)  # Raises: every input file is empty.
  return prepared


def _log_plan(log, prepared: Prepared, plan: Plan, engine: str) -> None:
  log(f"create_pretraining_data: {len(prepared.files)} input files, "
      f"{len(plan.sizes)} languages, {engine} -> {prepared.output_dir}")
  for lang in sorted(plan.sizes):
    if plan.sizes[lang]:
      log(f"  {lang}: {plan.sizes[lang]:,} bytes, sampling "
          f"q={plan.probabilities[lang]:.3f}, passes per document "
          f"{plan.passes[lang]:.2f}")
    else:
      log(f"  {lang}: no text (skipped)")


def check_has_sequences(meta: Dict[str, Any], inputs: Sequence[str]) -> None:
  if meta["num_examples"] == 0:
    raise text_inputs.InputError(
        f"inputs {list(inputs)} contain no text (only blank lines or "
        "unparsable JSON); no records written.")


class staged_output:  # pylint: disable=invalid-name
  """Context: a staging directory inside the output, swapped in on success.

  On any failure the staging directory (and the output directory, when this
  run created it and it is empty) is removed; the old records are untouched.
  """

  def __init__(self, output_dir: str):
    self.output_dir = output_dir
    self.created = not fileio.exists(output_dir)
    self.staging = None

  def __enter__(self) -> str:
    self.staging = pretraining_records.new_staging_directory(self.output_dir)
    return self.staging

  def __exit__(self, exc_type, exc, tb):
    if exc_type is None:
      pretraining_records.swap_in_records(self.staging, self.output_dir)
      return False
    fileio.rmtree(self.staging)
    if self.created and fileio.isdir(self.output_dir) and not fileio.listdir(
        self.output_dir):
      fileio.rmtree(self.output_dir)
    return False


def _local_spill_directory(staging: str):
  """Workers' temporary files: in the staging directory when it is local."""
  if fileio.is_remote(staging):
    return tempfile.TemporaryDirectory(prefix="rembert_tf-spill-")
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


def run_local(prepared: Prepared, plan: Plan, staging: str, num_workers: int,
              log, verbose: bool = True) -> Dict[str, Any]:
  """The multiprocess engine: records and metadata.json into `staging`."""
  options = prepared.job.options
  with _local_spill_directory(staging) as spill_dir:
    tasks = [(i, f, plan.passes, prepared.job, spill_dir, prepared.languages)
             for i, f in prepared.tasks]
    progress = _Progress(len(tasks), verbose)
    results = _run_tasks(tasks, num_workers, progress)
    if sum(r.count("sequences") for r in results) == 0:
      check_has_sequences({"num_examples": 0}, prepared.inputs)
    progress.close()  # Only on success: an error stays the last line.
    results.sort(key=lambda r: r.unit_index)
    log(f"create_pretraining_data: writing {options.num_output_shards} shards")
    shard_meta = _merge_shards(results, spill_dir, staging, options)
  meta = build_metadata(inputs=prepared.inputs, files=prepared.files, plan=plan,
                        results=results, shard_meta=shard_meta,
                        job=prepared.job,
                        sentencepiece_sha256=prepared.sentencepiece_sha256)
  fileio.write_json(fileio.join(staging, pretraining_records.METADATA_FILE), meta)
  return meta


@fileio.writes_output("output_dir")
def create_pretraining_data(inputs: Sequence[str],
                            output_dir,
                            sentencepiece_model,
                            options: Optional[RecordOptions] = None,
                            *,
                            input_format: str = "auto",
                            languages: Optional[Sequence[str]] = None,
                            language_field: Optional[str] = None,
                            num_workers: int = 1,
                            runner: Optional[str] = None,
                            beam_args: Sequence[str] = (),
                            overwrite: bool = False,
                            verbose: bool = True,
                            **option_fields) -> Dict[str, Any]:
  """Makes pre-training records; returns the metadata written to metadata.json.

  Args:
    inputs: input specs (`corpus/{lang}/*.txt`, `en=path/*.json`; see
      text_inputs): plain text, wikiextractor or C4/mC4 JSON lines, gzipped
      or not, on any filesystem.
    output_dir: gets `pretrain-XXXXX-of-YYYYY.tfrecord` and metadata.json.
    sentencepiece_model: any SentencePiece model with [CLS], [SEP], [MASK], a
      padding and an unknown piece (ids by piece name).
    options: the record settings (`RecordOptions`); keyword arguments named
      like its fields (`seq_length=128`, `masking=Masking(...)`) override it.
    input_format, languages, language_field: see `text_inputs.resolve_inputs`.
    num_workers: processes (local) or Beam workers; the output does not depend
      on it.
    runner: None for the local multiprocess engine, or an Apache Beam runner
      name (`DirectRunner`, `DataflowRunner`, `FlinkRunner`, `SparkRunner`);
      `beam_args` are Beam pipeline options (`--project=...`). Both engines
      write the same bytes for a seed.
    overwrite: replace records already in output_dir (the old ones stay until
      the new ones are complete).
  Raises:
    text_inputs.InputError (missing / empty input), errors.OutputExistsError
    (records exist), tokenizer.TokenizerError (bad model), errors.UsageError
    (bad flag): all `errors.RemBertError`.
  """
  options = dataclasses.replace(options or RecordOptions(), **option_fields)
  if num_workers < 1:
    raise errors.UsageError(f"--num_workers must be >= 1, got {num_workers}.")
  log = (lambda m: print(m, flush=True)) if verbose else (lambda m: None)
  start = time.time()
  prepared = prepare(inputs, output_dir, sentencepiece_model, options,
                     input_format=input_format, languages=languages,
                     language_field=language_field, overwrite=overwrite)
  with staged_output(prepared.output_dir) as staging:
    if runner:
      from rembert_tf.data import beam_pretraining_data  # pylint: disable=g-import-not-at-top
      meta = beam_pretraining_data.run_pipeline(
          prepared, staging, runner=runner, num_workers=num_workers,
          beam_args=beam_args, log=log)
    else:
      plan = plan_languages(
          text_inputs.language_sizes(prepared.files, prepared.languages),
          options.language_sampling_alpha, options.dupe_factor, inputs)
      _log_plan(log, prepared, plan, f"{num_workers} worker(s)")
      meta = run_local(prepared, plan, staging, num_workers, log, verbose)
    check_has_sequences(meta, inputs)
  _log_summary(log, meta, time.time() - start)
  return meta


def _log_summary(log, meta: Dict[str, Any], elapsed: float) -> None:
  languages = meta["languages"].values()
  tokens = sum(l["tokens"] for l in languages)
  log(f"create_pretraining_data: {meta['num_examples']} sequences from "
      f"{sum(l['documents'] for l in languages)} documents, {tokens} tokens "
      f"in {elapsed:.1f}s ({tokens / max(elapsed, 1e-9):,.0f} tokens/s)")
  if meta["languages_without_text"]:
    log(f"  languages without text: {', '.join(meta['languages_without_text'])}")
