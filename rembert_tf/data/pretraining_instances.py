"""Raw text -> pre-training sequences: the steps `pretraining_record_creation` runs.

Follows Model Garden's `official/nlp/data/create_pretraining_data.py` for
packing and masking, without next-sentence pairs (docs/data.md: the language
mix and the passes per document). A chunk of DOCUMENTS_PER_CHUNK documents
draws from `default_rng([seed, unit, chunk])`, so the records are the same for
a seed whatever the engine or worker count.

Example:
```python
import numpy as np
from rembert_tf.data import pretraining_instances
rng = np.random.default_rng(0)
lines = [np.arange(5) + 100, np.arange(70) + 200]
sequences = pretraining_instances.pack_document(lines, 30, 0.1, rng)
```
"""
import collections
import dataclasses
import functools
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from rembert_tf.common import fileio
from rembert_tf.common import output_overlap
from rembert_tf.data import pretraining_record_format
from rembert_tf.data import text_inputs
from rembert_tf.data import tfds_text_inputs
from rembert_tf.data import tokenizer

# Documents whose records are masked and encoded together (one RNG each).
DOCUMENTS_PER_CHUNK = 256
MAX_SEQ_LENGTH = 8192
# Seeds the shard shuffles apart from the chunks' generators.
_SHARD_SHUFFLE_STREAM = 1_000_003

Masking = pretraining_record_format.Masking
_require_in_range = pretraining_record_format.require_in_range


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
    return (pretraining_record_format.LAYOUT_UNMASKED if self.unmasked
            else pretraining_record_format.LAYOUT_STATIC)

  def check(self) -> "RecordOptions":
    """Raises errors.UsageError naming the flag that is out of range."""
    _require_in_range("seq_length", self.seq_length, 3, MAX_SEQ_LENGTH,
                      " ([CLS] + at least one token + [SEP])")
    _require_in_range("max_predictions_per_seq", self.max_predictions_per_seq,
                      1, self.seq_length - 2, f" (--seq_length "
                      f"{self.seq_length} minus [CLS] and [SEP])")
    self.masking.check()
    _require_in_range("dupe_factor", self.dupe_factor, 1)
    _require_in_range("short_seq_prob", self.short_seq_prob, 0, 1)
    _require_in_range("alpha", self.language_sampling_alpha, 0)
    _require_in_range("num_output_shards", self.num_output_shards, 1, 100_000)
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


# What metadata.json counts per language.
_COUNTS = ("documents", "lines", "tokens", "sequences")


@dataclasses.dataclass
class UnitResult:
  """Counts of one unit (input file): per (language, one of _COUNTS), and
  its records per shard and language."""
  unit_index: int
  path: str
  read: text_inputs.ReadStats = dataclasses.field(
      default_factory=text_inputs.ReadStats)
  counts: collections.Counter = dataclasses.field(
      default_factory=collections.Counter)
  shard_languages: Dict[int, Dict[str, int]] = dataclasses.field(
      default_factory=dict)

  def count(self, name: str, language: Optional[str] = None) -> int:
    if language is not None:
      return self.counts[language, name]
    return sum(n for (_, counted), n in self.counts.items() if counted == name)


def pack_document(lines_ids: Sequence[Sequence[int]], max_num_tokens: int,
                  short_seq_prob: float, rng: np.random.Generator
                  ) -> List[np.ndarray]:
  """Greedy packing of a document's tokenised lines into sequences.

  Lines are appended while they fit the target length (max_num_tokens, or with
  probability short_seq_prob a random shorter one); a longer line is split.
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


def plan_languages(sizes: Dict[str, int], alpha: float, dupe_factor: int,
                   inputs: Sequence[str]) -> Plan:
  """Smoothed sampling from the first pass's bytes per language; r_l, the
  passes per document, makes the largest ratio q_l / p_l `dupe_factor`."""
  if not sizes or all(n == 0 for n in sizes.values()):
    raise text_inputs.TextInputError(
        f"inputs {list(inputs)}: every input file is empty; there is no text.")
  sizes = dict(sorted(sizes.items()))  # Float sums in one order everywhere.
  q = text_inputs.smoothed_language_probabilities(sizes, alpha)
  total = float(sum(sizes.values()))
  ratio = {l: q[l] / (n / total) for l, n in sizes.items() if n > 0}
  base = min(ratio.values())
  return Plan(sizes=sizes, probabilities=q,
              passes={l: dupe_factor * r / base for l, r in ratio.items()})


@functools.cache
def sentencepiece_processor(path: str):
  """The model loaded once per process (workers reuse it for every chunk)."""
  return tokenizer.load_sentencepiece(path)


def chunk_records(chunk: Sequence[Tuple[str, List[str]]], unit_index: int,
                  chunk_index: int, passes: Mapping[str, float],
                  job: RecordJob
                  ) -> Tuple[List[Tuple[int, str, bytes]], collections.Counter]:
  """Tokenises, packs, masks and encodes one chunk of (language, lines)
  documents: its (shard, language, record)s and its `UnitResult.counts`."""
  options = job.options
  sp = sentencepiece_processor(job.sentencepiece_model)
  flat_ids = sp.encode([line for _, lines in chunk for line in lines],
                       num_threads=1)
  rng = np.random.default_rng([options.seed, unit_index, chunk_index])
  contents, languages = [], []
  counts = collections.Counter()
  start = 0
  for language, lines in chunk:
    lines_ids = flat_ids[start:start + len(lines)]
    start += len(lines)
    passes_l = passes.get(language, 0.0)
    whole = int(np.floor(passes_l))
    num_passes = whole + int(rng.random() < passes_l - whole)
    counts[language, "documents"] += 1
    counts[language, "lines"] += len(lines)
    counts[language, "tokens"] += sum(len(ids) for ids in lines_ids)
    for _ in range(num_passes):
      packed = pack_document(lines_ids, options.seq_length - 2,
                             options.short_seq_prob, rng)
      contents.extend(packed)
      languages.extend([language] * len(packed))
      counts[language, "sequences"] += len(packed)
  records = pretraining_record_format.encode_sequences(
      contents, seq_length=options.seq_length,
      max_predictions_per_seq=options.max_predictions_per_seq,
      special=job.special, rng=rng, layout=options.layout,
      masking=options.masking)
  shards = rng.integers(options.num_output_shards, size=len(records)).tolist()
  return list(zip(shards, languages, records)), counts


def shard_permutation(seed: int, shard_index: int, num_records: int
                      ) -> np.ndarray:
  """The order of a shard's records (given in unit, chunk, record order)."""
  return np.random.default_rng([seed, _SHARD_SHUFFLE_STREAM, shard_index]
                               ).permutation(num_records)


@dataclasses.dataclass
class Prepared:
  """Everything decided before the work starts (flags, model, inputs)."""
  inputs: List[str]
  output_dir: str
  files: List[text_inputs.InputFile]
  job: RecordJob
  sentencepiece_sha256: str
  languages: Optional[List[str]]
  # (unit index, file) of every non-empty input file, in sorted order.
  tasks: List[Tuple[int, text_inputs.InputFile]]


def prepare(inputs: Sequence[str], output_dir, sentencepiece_model,
            options: RecordOptions, *, input_format: str = "auto",
            languages: Optional[Sequence[str]] = None,
            language_field: Optional[str] = None,
            tfds: Optional[tfds_text_inputs.TfdsTextOptions] = None
            ) -> Prepared:
  """Checks the flags, the model and the inputs (file and `tfds:` specs),
  and that the output overlaps none of them, before any work starts."""
  options.check()
  output_dir = fileio.as_str(output_dir).rstrip("/")
  model = fileio.as_str(sentencepiece_model)
  special = tokenizer.SpecialTokens.from_model(model)
  files = tfds_text_inputs.resolve_inputs(inputs, input_format, languages,
                                          language_field, tfds)
  output_overlap.refuse_overlap(output_dir, dict(
      {"--sentencepiece_model": model},
      **{f"--input {f.path}": f.path for f in files}), "--output_dir")
  tasks = [(i, f) for i, f in enumerate(files) if f.size()]
  if not tasks:
    plan_languages({}, options.language_sampling_alpha, options.dupe_factor,
                   inputs)  # Raises: every input file is empty.
  return Prepared(inputs=list(inputs), output_dir=output_dir, files=files,
                  job=RecordJob(options, model, special),
                  sentencepiece_sha256=fileio.sha256(model),
                  languages=list(languages) if languages else None,
                  tasks=tasks)


def build_metadata(prepared: Prepared, plan: Plan,
                   results: Sequence[UnitResult],
                   shard_meta: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
  """metadata.json of a record directory (on every runner)."""
  job, files = prepared.job, prepared.files
  options = job.options
  meta = pretraining_record_format.base_metadata(
      layout=options.layout, seq_length=options.seq_length,
      max_predictions_per_seq=options.max_predictions_per_seq,
      special=job.special, masking=options.masking)
  meta["masking"].update(dupe_factor=options.dupe_factor,
                         short_seq_prob=options.short_seq_prob)
  meta["num_examples"] = int(sum(s["num_examples"] for s in shard_meta))
  meta["shards"] = list(shard_meta)
  by_path = {r.path: r for r in results}
  total_bytes = sum(plan.sizes.values())
  meta["languages"] = {}
  for lang in sorted(plan.sizes):
    path_files = [f for f in files if f.language == lang and
                  f.languages_known_from_path]
    path_results = [by_path[f.path] for f in path_files if f.path in by_path]
    meta["languages"][lang] = {
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
  meta["languages_without_text"] = sorted(
      l for l, m in meta["languages"].items() if m["documents"] == 0)
  meta["inputs"] = [_input_metadata(f, by_path.get(f.path)) for f in files]
  meta["tokenizer"] = {"sentencepiece_model": job.sentencepiece_model,
                       "sha256": prepared.sentencepiece_sha256,
                       "vocab_size": job.special.vocab_size}
  meta["sentencepiece_sha256"] = prepared.sentencepiece_sha256
  meta["language_sampling_alpha"] = options.language_sampling_alpha
  meta["seed"] = options.seed
  return meta


def _input_metadata(f: text_inputs.InputFile, r: Optional[UnitResult]
                    ) -> Dict[str, Any]:
  """One entry of metadata.json's `inputs`: the file and what it gave."""
  entry = {"path": f.path, "language": f.language or None, "format": f.format,
           "documents": r.count("documents") if r else 0,
           "sequences": r.count("sequences") if r else 0}
  if f.language_field:
    entry["language_field"] = f.language_field
  if r and not f.languages_known_from_path:
    entry["invalid_utf8_replacements"] = r.read.invalid_utf8_replacements
    entry["skipped_json_lines"] = r.read.skipped_json_lines
  return entry
