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
`tfrecord_writer`) into per-unit temporary files; the parent shuffles and
concatenates them into `pretrain-XXXXX-of-YYYYY.tfrecord` shards, each written under
a temporary name (`.incomplete`) and renamed when complete, and writes
`metadata.json` last. A directory that already holds records is refused unless
`overwrite=True`.

Compared with Model Garden's `official/nlp/data/create_pretraining_data.py`
(which this follows for masking and packing): no next-sentence pairs (RemBERT
is MLM-only), language-smoothed mixing, multi-process work split with
worker-count-independent output, and vectorised masking / encoding.

Example:
```python
from rembert_tf.data import pretraining_data
meta = pretraining_data.create_pretraining_data(
    inputs=["/tmp/corpus/{lang}/*.txt"], output_dir="/tmp/records",
    sentencepiece_model="/tmp/spm/sentencepiece.model", seq_length=128,
    max_predictions_per_seq=20, num_output_shards=4, num_workers=2)
print(meta["num_examples"], meta["languages"]["en"]["sequences"])
```
"""
import dataclasses
import functools
import itertools
import multiprocessing
import os
import pathlib
import queue
import shutil
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from rembert_tf.data import pretraining_records
from rembert_tf.data import text_inputs
from rembert_tf.data import tfrecord_writer
from rembert_tf.data import tokenizer


@dataclasses.dataclass(frozen=True)
class RecordOptions:
  """What every worker needs to turn documents into records."""
  sentencepiece_model: str
  vocab_size: int
  seq_length: int = 128
  max_predictions_per_seq: int = 20
  masked_lm_prob: float = 0.15
  mask_token_rate: float = 0.8
  random_token_rate: float = 0.1
  short_seq_prob: float = 0.1
  layout: str = pretraining_records.LAYOUT_STATIC
  num_output_shards: int = 8
  seed: int = 12345


@dataclasses.dataclass
class UnitResult:
  """Counts of one unit (input file)."""
  unit_index: int
  language: str
  path: str
  documents: int = 0
  lines: int = 0
  tokens: int = 0
  sequences: int = 0
  invalid_utf8_replacements: int = 0
  skipped_json_lines: int = 0
  sequences_per_shard: Optional[List[int]] = None


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


class _ShardSpill:
  """Per-unit temporary files, one per output shard, of TFRecord-framed records.

  Records are framed (CRCs computed) here, in the worker, so the parent only
  shuffles and concatenates.
  """

  def __init__(self, tmp_dir: str, unit_index: int, num_shards: int):
    self._paths = [os.path.join(tmp_dir, f"unit-{unit_index:06d}.shard-{k:05d}")
                   for k in range(num_shards)]
    self._pending: List[bytes] = []
    self._pending_shards: List[int] = []
    self._pending_bytes = 0
    self._files = [None] * num_shards
    self.counts = [0] * num_shards

  def add(self, shard: int, record: bytes):
    self._pending.append(record)
    self._pending_shards.append(shard)
    self._pending_bytes += len(record)
    self.counts[shard] += 1
    if self._pending_bytes > (8 << 20):
      self._flush()

  def _flush(self):
    framed = tfrecord_writer.frame_each(self._pending)
    by_shard: Dict[int, List[bytes]] = {}
    for shard, data in zip(self._pending_shards, framed):
      by_shard.setdefault(shard, []).append(data)
    for shard, chunks in sorted(by_shard.items()):
      if self._files[shard] is None:
        self._files[shard] = open(self._paths[shard], "wb")
      self._files[shard].write(b"".join(chunks))
    self._pending, self._pending_shards, self._pending_bytes = [], [], 0

  def close(self):
    if self._pending:
      self._flush()
    for f in self._files:
      if f is not None:
        f.close()


def read_spill(path: str) -> List[bytes]:
  if not os.path.exists(path):
    return []
  with open(path, "rb") as f:
    return tfrecord_writer.split_framed(f.read())


_PROCESSOR_CACHE: Dict[str, Any] = {}
# Documents whose records are masked and encoded together (one RNG each).
DOCUMENTS_PER_CHUNK = 256


def _processor(path: str):
  if path not in _PROCESSOR_CACHE:
    _PROCESSOR_CACHE[path] = tokenizer.load_sentencepiece(path)
  return _PROCESSOR_CACHE[path]


def _tokenized_documents(sp, documents, chunk_lines: int = 4096):
  """Yields each document as a list of token-id lists (lines).

  Lines of many documents are tokenised in one single-threaded SentencePiece
  call: per-call overhead dominates short lines otherwise.
  """
  chunk: List[List[str]] = []
  num_lines = 0
  def flush():
    flat = [line for doc in chunk for line in doc]
    ids = sp.encode(flat, num_threads=1)
    start = 0
    for doc in chunk:
      yield ids[start:start + len(doc)]
      start += len(doc)
  for document in documents:
    chunk.append(document)
    num_lines += len(document)
    if num_lines >= chunk_lines:
      yield from flush()
      chunk, num_lines = [], 0
  if chunk:
    yield from flush()


def process_unit(unit_index: int, input_file: text_inputs.InputFile,
                 passes_per_document: float, options: RecordOptions,
                 tmp_dir: str,
                 progress: Optional[Callable[[int, int, int], None]] = None
                 ) -> UnitResult:
  """Tokenises, packs, masks and spills one input file (runs in a worker)."""
  sp = _processor(options.sentencepiece_model)
  result = UnitResult(unit_index, input_file.language, input_file.path)
  spill = _ShardSpill(tmp_dir, unit_index, options.num_output_shards)
  stats = text_inputs.ReadStats()
  max_num_tokens = options.seq_length - 2
  whole_passes = int(np.floor(passes_per_document))
  extra_pass_prob = passes_per_document - whole_passes
  pending = [0, 0, 0]
  last_report = time.time()
  encode = functools.partial(
      pretraining_records.encode_sequences, seq_length=options.seq_length,
      max_predictions_per_seq=options.max_predictions_per_seq,
      vocab_size=options.vocab_size, layout=options.layout,
      masked_lm_prob=options.masked_lm_prob,
      mask_token_rate=options.mask_token_rate,
      random_token_rate=options.random_token_rate)
  try:
    documents = _tokenized_documents(
        sp, text_inputs.iter_documents(input_file, stats))
    for chunk_index in itertools.count():
      chunk = list(itertools.islice(documents, DOCUMENTS_PER_CHUNK))
      if not chunk:
        break
      # All randomness of a chunk (a fixed run of documents of this file)
      # comes from its own generator: independent of the worker count.
      rng = np.random.default_rng([options.seed, unit_index, chunk_index])
      contents = []
      for lines_ids in chunk:
        num_passes = whole_passes + int(rng.random() < extra_pass_prob)
        doc_tokens = sum(len(ids) for ids in lines_ids)
        result.tokens += doc_tokens
        pending[0] += 1
        pending[2] += doc_tokens
        for _ in range(num_passes):
          contents.extend(pack_document(lines_ids, max_num_tokens,
                                        options.short_seq_prob, rng))
      records = encode(contents, rng=rng)
      shards = rng.integers(options.num_output_shards, size=len(records))
      for shard, record in zip(shards.tolist(), records):
        spill.add(shard, record)
      result.sequences += len(records)
      pending[1] += len(records)
      if progress is not None and time.time() - last_report > 0.5:
        progress(*pending)
        pending = [0, 0, 0]
        last_report = time.time()
  finally:
    spill.close()
  if progress is not None and any(pending):
    progress(*pending)
  result.documents = stats.documents
  result.lines = stats.lines
  result.invalid_utf8_replacements = stats.invalid_utf8_replacements
  result.skipped_json_lines = stats.skipped_json_lines
  result.sequences_per_shard = spill.counts
  return result


# ----------------------------------------------------------------------------
# Worker-process plumbing (spawn: no TensorFlow in the workers).

_WORKER_QUEUE = None


def _init_worker(progress_queue):
  global _WORKER_QUEUE
  _WORKER_QUEUE = progress_queue


def _worker_progress(documents, sequences, tokens):
  _WORKER_QUEUE.put((documents, sequences, tokens))


def _run_unit(args):
  unit_index, input_file, passes, options, tmp_dir = args
  return process_unit(unit_index, input_file, passes, options, tmp_dir,
                      progress=_worker_progress)


class _Progress:
  """Console progress: documents, sequences, tokens per second."""

  def __init__(self, log, total_units: int):
    self.log = log
    self.total_units = total_units
    self.documents = self.sequences = self.tokens = 0
    self.units_done = 0
    self.start = time.time()
    self._last = 0.0
    self._lock = threading.Lock()

  def add(self, documents, sequences, tokens):
    with self._lock:
      self.documents += documents
      self.sequences += sequences
      self.tokens += tokens
    self.maybe_print()

  def maybe_print(self, force=False):
    now = time.time()
    if not force and now - self._last < 2.0:
      return
    self._last = now
    elapsed = max(now - self.start, 1e-9)
    self.log(f"  [{elapsed:7.1f}s] files {self.units_done}/{self.total_units}"
             f"  documents {self.documents}  sequences {self.sequences}  "
             f"tokens {self.tokens}  ({self.tokens / elapsed:,.0f} tokens/s)")


def passes_per_document(sizes: Dict[str, int], alpha: float,
                        dupe_factor: int) -> Dict[str, float]:
  """r_l: how often each document of language l is used (see module doc)."""
  q = text_inputs.smoothed_language_probabilities(sizes, alpha)
  total = float(sum(sizes.values()))
  ratio = {l: q[l] / (n / total) for l, n in sizes.items() if n > 0}
  base = min(ratio.values())
  return {l: dupe_factor * r / base for l, r in ratio.items()}


def create_pretraining_data(inputs: Sequence[str],
                            output_dir,
                            sentencepiece_model,
                            *,
                            seq_length: int = 128,
                            max_predictions_per_seq: int = 20,
                            masked_lm_prob: float = 0.15,
                            mask_token_rate: float = 0.8,
                            random_token_rate: float = 0.1,
                            dupe_factor: int = 1,
                            short_seq_prob: float = 0.1,
                            unmasked: bool = False,
                            language_sampling_alpha: float = 0.7,
                            input_format: str = "auto",
                            languages: Optional[Sequence[str]] = None,
                            num_output_shards: int = 8,
                            num_workers: int = 1,
                            seed: int = 12345,
                            overwrite: bool = False,
                            verbose: bool = True) -> Dict[str, Any]:
  """Makes pre-training records; returns the metadata written to metadata.json.

  Args:
    inputs: input specs (`corpus/{lang}/*.txt`, `en=path/*.json`; see
      text_inputs), plain text or wikiextractor JSON-lines.
    output_dir: gets `pretrain-XXXXX-of-YYYYY.tfrecord` and metadata.json.
    sentencepiece_model: a model from train_sentencepiece (fixed special ids).
    seq_length, max_predictions_per_seq: record shapes (S, P).
    masked_lm_prob, mask_token_rate, random_token_rate: static masking.
    dupe_factor: passes over the largest language (masked differently).
    short_seq_prob: probability of a shorter target sequence length.
    unmasked: write the unmasked layout (dynamic masking in the pipeline).
    language_sampling_alpha: smoothing exponent of the language mix.
    num_output_shards: shard files written.
    num_workers: processes; the output does not depend on it.
    seed: the output is a pure function of inputs, model, flags and seed.
    overwrite: replace records already in output_dir.
  Raises:
    text_inputs.InputError (missing / empty input), FileExistsError (records
    exist), tokenizer.TokenizerError (bad model), ValueError (bad flag).
  """
  log = (lambda m: print(m, flush=True)) if verbose else (lambda m: None)
  if seq_length < 3:
    raise ValueError(f"seq_length must be >= 3 ([CLS] x [SEP]), got {seq_length}.")
  if not 0 < masked_lm_prob <= 1:
    raise ValueError(f"masked_lm_prob must be in (0, 1], got {masked_lm_prob}.")
  if mask_token_rate + random_token_rate > 1 or min(mask_token_rate,
                                                    random_token_rate) < 0:
    raise ValueError("mask_token_rate + random_token_rate must be in [0, 1], got "
                     f"{mask_token_rate} + {random_token_rate}.")
  if max_predictions_per_seq < 1 or num_output_shards < 1 or num_workers < 1:
    raise ValueError("max_predictions_per_seq, num_output_shards and "
                     "num_workers must be >= 1.")
  if dupe_factor < 1:
    raise ValueError(f"dupe_factor must be >= 1, got {dupe_factor}.")
  tok_meta = tokenizer.read_tokenizer_metadata(sentencepiece_model)
  files = text_inputs.resolve_inputs(inputs, input_format, languages)
  output_dir = pathlib.Path(output_dir)
  output_dir.mkdir(parents=True, exist_ok=True)
  pretraining_records.refuse_existing_records(output_dir, overwrite)

  sizes = text_inputs.language_sizes(files)
  empty_languages = sorted(l for l, n in sizes.items() if n == 0)
  if len(empty_languages) == len(sizes):
    raise text_inputs.InputError(
        f"inputs {list(inputs)}: every input file is empty; there is no text.")
  passes = passes_per_document(sizes, language_sampling_alpha, dupe_factor)
  probabilities = text_inputs.smoothed_language_probabilities(
      sizes, language_sampling_alpha)
  layout = (pretraining_records.LAYOUT_UNMASKED if unmasked
            else pretraining_records.LAYOUT_STATIC)
  options = RecordOptions(
      sentencepiece_model=str(sentencepiece_model),
      vocab_size=tok_meta["vocab_size"], seq_length=seq_length,
      max_predictions_per_seq=max_predictions_per_seq,
      masked_lm_prob=masked_lm_prob, mask_token_rate=mask_token_rate,
      random_token_rate=random_token_rate, short_seq_prob=short_seq_prob,
      layout=layout, num_output_shards=num_output_shards, seed=seed)
  log(f"create_pretraining_data: {len(files)} input files, "
      f"{len(sizes)} languages, {num_workers} worker(s) -> {output_dir}")
  for lang in sorted(sizes):
    if sizes[lang]:
      log(f"  {lang}: {sizes[lang]:,} bytes, sampling q={probabilities[lang]:.3f}"
          f", passes per document {passes[lang]:.2f}")
    else:
      log(f"  {lang}: no text (skipped)")

  tmp_dir = tempfile.mkdtemp(prefix=".create_pretraining_data.tmp-",
                             dir=output_dir)
  try:
    tasks = [(i, f, passes.get(f.language, 0.0), options, tmp_dir)
             for i, f in enumerate(files) if f.size() > 0]
    progress = _Progress(log, len(tasks))
    results = _run_tasks(tasks, num_workers, progress)
    progress.maybe_print(force=True)
    results.sort(key=lambda r: r.unit_index)
    total_sequences = sum(r.sequences for r in results)
    if total_sequences == 0:
      raise text_inputs.InputError(
          f"inputs {list(inputs)} contain no text (only blank lines or "
          "unparsable JSON); no records written.")
    log(f"create_pretraining_data: writing {num_output_shards} shards")
    shard_meta = _merge_shards(results, tmp_dir, output_dir, options)
  finally:
    shutil.rmtree(tmp_dir, ignore_errors=True)
  # Remove shards of an overwritten run that this run did not rewrite.
  new_names = {s["file"] for s in shard_meta}
  for path in pretraining_records.existing_records(output_dir):
    if path.name.endswith(pretraining_records.RECORD_SUFFIX) and (
        path.name not in new_names):
      path.unlink()

  meta = pretraining_records.base_metadata(
      layout=layout, seq_length=seq_length,
      max_predictions_per_seq=max_predictions_per_seq,
      vocab_size=tok_meta["vocab_size"], masked_lm_prob=masked_lm_prob,
      mask_token_rate=mask_token_rate, random_token_rate=random_token_rate)
  meta["masking"].update(dupe_factor=dupe_factor, short_seq_prob=short_seq_prob)
  meta["num_examples"] = total_sequences
  meta["shards"] = shard_meta
  languages_meta = {}
  for lang in sorted(sizes):
    rs = [r for r in results if r.language == lang]
    languages_meta[lang] = {
        "input_files": sum(1 for f in files if f.language == lang),
        "input_bytes": sizes[lang],
        "documents": sum(r.documents for r in rs),
        "lines": sum(r.lines for r in rs),
        "tokens": sum(r.tokens for r in rs),
        "sequences": sum(r.sequences for r in rs),
        "natural_probability": round(sizes[lang] / sum(sizes.values()), 6),
        "sampling_probability": round(probabilities[lang], 6),
        "passes_per_document": round(passes.get(lang, 0.0), 6),
        "invalid_utf8_replacements": sum(r.invalid_utf8_replacements for r in rs),
        "skipped_json_lines": sum(r.skipped_json_lines for r in rs),
    }
  without_text = sorted(l for l, m in languages_meta.items() if m["documents"] == 0)
  meta["languages"] = languages_meta
  meta["languages_without_text"] = without_text
  meta["inputs"] = [{"path": str(f.path), "language": f.language,
                     "format": f.format,
                     "documents": next((r.documents for r in results
                                        if r.path == f.path), 0),
                     "sequences": next((r.sequences for r in results
                                        if r.path == f.path), 0)}
                    for f in files]
  meta["tokenizer"] = {"sentencepiece_model": str(sentencepiece_model),
                       "sha256": tok_meta["sha256"],
                       "vocab_size": tok_meta["vocab_size"]}
  meta["sentencepiece_sha256"] = tok_meta["sha256"]
  meta["language_sampling_alpha"] = language_sampling_alpha
  meta["seed"] = seed
  pretraining_records.write_json_atomic(
      output_dir / pretraining_records.METADATA_FILE, meta)
  elapsed = time.time() - progress.start
  total_tokens = sum(r.tokens for r in results)
  log(f"create_pretraining_data: {total_sequences} sequences from "
      f"{sum(r.documents for r in results)} documents, {total_tokens} tokens "
      f"in {elapsed:.1f}s ({total_tokens / max(elapsed, 1e-9):,.0f} tokens/s)")
  if without_text:
    log(f"  languages without text: {', '.join(without_text)}")
  return meta


def _run_tasks(tasks, num_workers: int, progress: _Progress) -> List[UnitResult]:
  if num_workers == 1 or len(tasks) <= 1:
    results = []
    for task in tasks:
      unit_index, input_file, passes, options, tmp_dir = task
      results.append(process_unit(unit_index, input_file, passes, options,
                                  tmp_dir, progress=progress.add))
      progress.units_done += 1
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
        progress.units_done += 1
    finally:
      done.set()
      thread.join()
  return results


def _merge_shards(results: List[UnitResult], tmp_dir: str, output_dir,
                  options: RecordOptions) -> List[Dict[str, Any]]:
  shard_meta = []
  num_shards = options.num_output_shards
  for k in range(num_shards):
    records = []
    per_language: Dict[str, int] = {}
    for r in results:
      unit_records = read_spill(os.path.join(
          tmp_dir, f"unit-{r.unit_index:06d}.shard-{k:05d}"))
      records.extend(unit_records)
      if unit_records:
        per_language[r.language] = per_language.get(r.language, 0) + len(
            unit_records)
    order = np.random.default_rng([options.seed, 1_000_003, k]).permutation(
        len(records))
    name = pretraining_records.shard_file_name(k, num_shards)
    count = tfrecord_writer.write_framed_file(
        pathlib.Path(output_dir) / name, (records[i] for i in order))
    shard_meta.append({"file": name, "num_examples": count,
                       "num_examples_per_language": dict(sorted(
                           per_language.items()))})
  return shard_meta
