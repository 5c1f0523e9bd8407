"""Raw text inputs: which files, which language, which documents; language sampling.

Reads plain text (blank lines between documents, as BERT's
create_pretraining_data) and JSON lines with a `text` field (wikiextractor,
C4 / mC4), gzipped or not, through `common.fileio` (docs/data.md: the specs).
Languages are mixed as mBERT / XLM-R do: q_l ~ p_l ** alpha.
"""
import dataclasses
import gzip
import json
import os
import re
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from rembert_tf.common import errors
from rembert_tf.common import fileio

FORMATS = ("auto", "text", "jsonl")
_LANG_PLACEHOLDER = "{lang}"
_EXPLICIT_LANG = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*)=(.+)$")
_REPLACEMENT = "\ufffd"
_ENCODED_REPLACEMENT = _REPLACEMENT.encode("utf-8")


class TextInputError(errors.InputError):
  """Input text is missing, empty or malformed beyond repair."""


@dataclasses.dataclass
class ReadStats:
  """Counters of one read (per file)."""
  documents: int = 0
  lines: int = 0
  invalid_utf8_replacements: int = 0
  skipped_json_lines: int = 0


@dataclasses.dataclass(frozen=True)
class InputFile:
  """One input file: a unit of work (`tfds_text_inputs.TfdsShard` is the
  other kind, with the same methods)."""
  language: str
  path: str
  format: str  # "text" or "jsonl"
  language_field: Optional[str] = None  # jsonl: the field naming the language

  def size(self) -> int:
    return fileio.size(self.path)

  @property
  def languages_known_from_path(self) -> bool:
    """True when every document of the file is of `language` (no field)."""
    return not (self.format == "jsonl" and self.language_field)

  def language_documents(self, stats: ReadStats,
                         keep: Optional[Sequence[str]] = None
                         ) -> Iterator[Tuple[str, List[str]]]:
    """(language, document) pairs, a document a list of its non-empty
    lines; `keep` filters the languages JSON lines name."""
    if self.format == "jsonl":
      return _jsonl_documents(self, stats, keep)
    return ((self.language, d) for d in _text_documents(self.path, stats))

  def language_bytes(self, keep: Optional[Sequence[str]] = None
                     ) -> Dict[str, int]:
    """Bytes of input per language (the size on disk where it can be)."""
    if self.languages_known_from_path and not self.path.endswith(".gz"):
      return {self.language: self.size()}
    if self.languages_known_from_path:
      return {self.language: sum(len(raw) for raw in _raw_lines(self.path))}
    sizes: Dict[str, int] = {}
    stats = ReadStats()
    for raw in _raw_lines(self.path):
      found = _json_text(decode_line(raw, stats).strip(), self)
      if found and not (keep and found[0] not in keep):
        sizes[found[0]] = sizes.get(found[0], 0) + len(raw)
    return sizes


def _format_of(path: str, input_format: str) -> str:
  if input_format not in FORMATS:
    raise TextInputError(f"input format must be one of {FORMATS}, got "
                         f"{input_format!r}.")
  if input_format != "auto":
    return input_format
  if path.endswith(".gz"):
    path = path[:-len(".gz")]
  return "jsonl" if path.endswith((".json", ".jsonl")) else "text"


def split_specs(specs) -> List[str]:
  """Input specs, comma-separated or repeated, as one list."""
  specs = [specs] if isinstance(specs, str) else specs
  return [s.strip() for spec in specs for s in spec.split(",") if s.strip()]


def resolve_inputs(specs: Sequence[str],
                   input_format: str = "auto",
                   languages: Optional[Sequence[str]] = None,
                   language_field: Optional[str] = None) -> List[InputFile]:
  """Input specs (globs with `{lang}`, `lang=glob`, a plain glob with
  `language_field`) -> sorted InputFiles of `languages` (None: all);
  TextInputError naming a spec that matches no file or has no language."""
  specs = split_specs(specs)
  if not specs:
    raise TextInputError("no input given; pass --input "
                         "'corpus/{lang}/*.txt' or --input en=path/*.txt.")
  found = {}
  for spec in specs:
    for language, path in _matching_files(spec, language_field):
      if languages and language not in languages and not language_field:
        continue
      key = path if fileio.is_remote(path) else os.path.abspath(path)
      found[key] = InputFile(language, path, _format_of(path, input_format),
                             language_field)
  if not found:
    raise TextInputError(f"inputs {specs} hold no files of the languages "
                         f"{list(languages or [])}.")
  return sorted(found.values(), key=lambda f: (f.language, f.path))


def _matching_files(spec: str, language_field: Optional[str]
                    ) -> List[Tuple[str, str]]:
  """(language, path) of every file of one spec ("" where documents say it)."""
  explicit = _EXPLICIT_LANG.match(spec)
  if explicit and _LANG_PLACEHOLDER not in spec:
    language, pattern = explicit.groups()
    _refuse_directory(spec, pattern)
    matched = [(language, p) for p in fileio.glob(pattern)]
  elif _LANG_PLACEHOLDER in spec:
    matched = _files_by_language_folder(spec)
  elif language_field:
    _refuse_directory(spec, spec)
    matched = [("", p) for p in fileio.glob(spec)]
  else:
    raise TextInputError(
        f"input {spec!r} does not say its language: put {{lang}} in the path "
        "pattern (corpus/{lang}/*.txt) or prefix it with the language "
        "(en=corpus/english/*.txt).")
  directories = [p for _, p in matched if fileio.isdir(p)]
  matched = [(lang, p) for lang, p in matched if p not in directories]
  if not matched and directories:
    raise TextInputError(
        f"input {spec!r} matches only directories ({directories[0]}"
        f"{', ...' if len(directories) > 1 else ''}), not files; give the "
        f"files inside them, e.g. {fileio.join(spec, '*.txt')!r}.")
  if not matched:
    raise TextInputError(f"input {spec!r} matches no files; check the path "
                         "(globs: *, ?, ** with {lang} for the language "
                         "folder).")
  return matched


def _files_by_language_folder(spec: str) -> List[Tuple[str, str]]:
  """(language, path) of a `{lang}` pattern: the language is what {lang} matched."""
  prefix, _, suffix = spec.partition(_LANG_PLACEHOLDER)
  if _LANG_PLACEHOLDER in suffix:
    raise TextInputError(f"input {spec!r}: use {{lang}} once.")
  regex = re.compile(
      "^" + _glob_to_regex(prefix) + r"([^/\\]+)" + _glob_to_regex(suffix) + "$")
  return [(m.group(1), path) for path in fileio.glob(prefix + "*" + suffix)
          for m in [regex.match(path)] if m]


def _refuse_directory(spec: str, pattern: str) -> None:
  if not any(c in pattern for c in "*?[") and fileio.isdir(pattern):
    raise TextInputError(
        f"input {spec!r} is a directory; give the files inside it, e.g. "
        f"{fileio.join(pattern, '*.txt')!r} (or {{lang}} for the language part).")


def _glob_to_regex(pattern: str) -> str:
  wildcards = {"**/": r"(?:.*/)?", "*": r"[^/]*", "?": r"[^/]"}
  return "".join(wildcards.get(part, re.escape(part))
                 for part in re.split(r"(\*\*/|\*|\?)", pattern))


def decode_line(raw: bytes, stats: ReadStats) -> str:
  """UTF-8 decode, replacing (and counting) invalid byte sequences."""
  try:
    return raw.decode("utf-8")
  except UnicodeDecodeError:
    text = raw.decode("utf-8", errors="replace")
    stats.invalid_utf8_replacements += (
        text.count(_REPLACEMENT) - raw.count(_ENCODED_REPLACEMENT))
    return text


def _raw_lines(path: str) -> Iterator[bytes]:
  """The file's raw lines (bytes), gunzipped when the name ends in .gz."""
  with fileio.open_file(path, "rb") as f:
    if not path.endswith(".gz"):
      yield from f
      return
    with gzip.GzipFile(fileobj=f, mode="rb") as lines:
      yield from lines


def _text_documents(path: str, stats: ReadStats) -> Iterator[List[str]]:
  document = []
  for raw in _raw_lines(path):
    line = decode_line(raw, stats).strip()
    if line:
      document.append(line)
      stats.lines += 1
    elif document:
      stats.documents += 1
      yield document
      document = []
  if document:
    stats.documents += 1
    yield document


def _json_text(line: str, input_file: InputFile
               ) -> Optional[Tuple[str, str]]:
  """(language, text) of one JSON line; None without a text string or a
  language (the line's field, else the file's)."""
  try:
    article = json.loads(line)
  except ValueError:
    return None
  if not isinstance(article, dict) or not isinstance(article.get("text"), str):
    return None
  language = (article.get(input_file.language_field)
              if input_file.language_field else None)
  if not isinstance(language, str) or not language:
    language = input_file.language
  return (language, article["text"]) if language else None


def _jsonl_documents(input_file: InputFile, stats: ReadStats,
                     keep: Optional[Sequence[str]] = None
                     ) -> Iterator[Tuple[str, List[str]]]:
  for raw in _raw_lines(input_file.path):
    line = decode_line(raw, stats).strip()
    if not line:
      continue
    found = _json_text(line, input_file)
    if not found:
      stats.skipped_json_lines += 1
      continue
    language, text = found
    if keep and language not in keep:
      continue
    document = [l.strip() for l in text.split("\n") if l.strip()]
    if document:
      stats.lines += len(document)
      stats.documents += 1
      yield language, document


def smoothed_language_probabilities(sizes: Mapping[str, float],
                                    alpha: float) -> Dict[str, float]:
  """q_l = p_l**alpha / sum(p**alpha), p_l = n_l / sum(n); zero sizes get 0."""
  if alpha < 0:
    raise TextInputError(f"language sampling alpha must be >= 0, got {alpha}.")
  total = float(sum(v for v in sizes.values() if v > 0))
  if total <= 0:
    raise TextInputError("all languages are empty: there is no text to sample.")
  weights = {l: (n / total) ** alpha if n > 0 else 0.0 for l, n in sizes.items()}
  norm = sum(weights.values())
  return {l: w / norm for l, w in weights.items()}
