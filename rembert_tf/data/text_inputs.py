"""Raw text inputs: which files, which language, which documents; language sampling.

Input layouts read (one or more files per language):
* plain text (`*.txt`, any other suffix): one sentence or paragraph per line,
  documents separated by blank lines (BERT's create_pretraining_data layout);
* wikiextractor JSON-lines (`*.json`, `*.jsonl`, or `--input_format=jsonl`):
  one `{"id", "url", "title", "text"}` object per line; one article is one
  document, its `text` split into lines.

Input specs (`--input`, repeatable / comma-separated):
* `corpus/{lang}/*.txt`: a glob whose `{lang}` part names the language;
* `en=wiki/en/**/wiki_*`: an explicit language for a glob.

Invalid UTF-8 is replaced by U+FFFD and counted (never a crash); JSON lines
that do not parse are skipped and counted.

Language mixing follows mBERT / XLM-R: with n_l the size of language l (bytes
of its input files) and p_l = n_l / sum(n), languages are sampled with
q_l proportional to p_l ** alpha (alpha=0.7 by default; 1 keeps the natural mix,
0 makes it uniform).

Example:
```python
from rembert_tf.data import text_inputs
files = text_inputs.resolve_inputs(["/tmp/corpus/{lang}/*.txt"])
for document in text_inputs.iter_documents(files[0]):
  print(files[0].language, document[:2])   # a list of lines
  break
q = text_inputs.smoothed_language_probabilities({"en": 90, "sw": 10}, 0.7)
```
"""
import dataclasses
import glob
import json
import os
import re
from typing import Dict, Iterator, List, Mapping, Optional, Sequence

FORMATS = ("auto", "text", "jsonl")
_LANG_PLACEHOLDER = "{lang}"
_EXPLICIT_LANG = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*)=(.+)$")
_REPLACEMENT = "\ufffd"
_ENCODED_REPLACEMENT = _REPLACEMENT.encode("utf-8")


class InputError(ValueError):
  """Input text is missing, empty or malformed beyond repair."""


@dataclasses.dataclass(frozen=True)
class InputFile:
  language: str
  path: str
  format: str  # "text" or "jsonl"

  def size(self) -> int:
    return os.path.getsize(self.path)


@dataclasses.dataclass
class ReadStats:
  """Counters of one read (per file)."""
  documents: int = 0
  lines: int = 0
  invalid_utf8_replacements: int = 0
  skipped_json_lines: int = 0

  def add(self, other: "ReadStats"):
    for field in dataclasses.fields(self):
      setattr(self, field.name,
              getattr(self, field.name) + getattr(other, field.name))


def _format_of(path: str, input_format: str) -> str:
  if input_format not in FORMATS:
    raise InputError(f"input format must be one of {FORMATS}, got "
                     f"{input_format!r}.")
  if input_format != "auto":
    return input_format
  return "jsonl" if path.endswith((".json", ".jsonl")) else "text"


def _split_specs(specs) -> List[str]:
  if isinstance(specs, str):
    specs = [specs]
  out = []
  for spec in specs:
    out.extend(s.strip() for s in spec.split(",") if s.strip())
  return out


def resolve_inputs(specs: Sequence[str],
                   input_format: str = "auto",
                   languages: Optional[Sequence[str]] = None) -> List[InputFile]:
  """Input specs -> sorted InputFile list (language from `{lang}` or `lang=`).

  Args:
    specs: globs with `{lang}`, or `lang=glob`; comma-separated allowed.
    input_format: "auto" (by suffix), "text" or "jsonl".
    languages: keep only these languages (None: all found).
  Raises:
    InputError naming the spec when it matches no file or has no language.
  """
  specs = _split_specs(specs)
  if not specs:
    raise InputError("no input given; pass --input 'corpus/{lang}/*.txt' or "
                     "--input en=path/*.txt.")
  found = {}
  for spec in specs:
    explicit = _EXPLICIT_LANG.match(spec)
    if explicit and _LANG_PLACEHOLDER not in spec:
      language, pattern = explicit.groups()
      paths = sorted(glob.glob(pattern, recursive=True))
      matched = [(language, p) for p in paths]
    elif _LANG_PLACEHOLDER in spec:
      prefix, _, suffix = spec.partition(_LANG_PLACEHOLDER)
      if _LANG_PLACEHOLDER in suffix:
        raise InputError(f"input {spec!r}: use {{lang}} once.")
      paths = sorted(glob.glob(prefix + "*" + suffix, recursive=True))
      regex = re.compile(
          "^" + _glob_to_regex(prefix) + r"([^/\\]+)" + _glob_to_regex(suffix) + "$")
      matched = []
      for path in paths:
        m = regex.match(path)
        if m:
          matched.append((m.group(1), path))
    else:
      raise InputError(
          f"input {spec!r} does not say its language: put {{lang}} in the path "
          "pattern (corpus/{lang}/*.txt) or prefix it with the language "
          "(en=corpus/english/*.txt).")
    matched = [(lang, p) for lang, p in matched if os.path.isfile(p)]
    if not matched:
      raise InputError(f"input {spec!r} matches no files; check the path "
                       "(globs: *, ?, ** with {lang} for the language folder).")
    for language, path in matched:
      if languages and language not in languages:
        continue
      found[os.path.abspath(path)] = InputFile(
          language, path, _format_of(path, input_format))
  if not found:
    raise InputError(f"inputs {specs} hold no files of the languages "
                     f"{list(languages or [])}.")
  return sorted(found.values(), key=lambda f: (f.language, f.path))


def _glob_to_regex(pattern: str) -> str:
  out = []
  i = 0
  while i < len(pattern):
    c = pattern[i]
    if pattern.startswith("**/", i):
      out.append(r"(?:.*/)?")
      i += 3
      continue
    if c == "*":
      out.append(r"[^/]*")
    elif c == "?":
      out.append(r"[^/]")
    else:
      out.append(re.escape(c))
    i += 1
  return "".join(out)


def decode_line(raw: bytes, stats: ReadStats) -> str:
  """UTF-8 decode, replacing (and counting) invalid byte sequences."""
  try:
    return raw.decode("utf-8")
  except UnicodeDecodeError:
    text = raw.decode("utf-8", errors="replace")
    stats.invalid_utf8_replacements += (
        text.count(_REPLACEMENT) - raw.count(_ENCODED_REPLACEMENT))
    return text


def _text_documents(path: str, stats: ReadStats) -> Iterator[List[str]]:
  document = []
  with open(path, "rb") as f:
    for raw in f:
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


def _jsonl_documents(path: str, stats: ReadStats) -> Iterator[List[str]]:
  with open(path, "rb") as f:
    for raw in f:
      line = decode_line(raw, stats).strip()
      if not line:
        continue
      try:
        article = json.loads(line)
        text = article["text"]
        if not isinstance(text, str):
          raise TypeError("text is not a string")
      except (ValueError, KeyError, TypeError):
        stats.skipped_json_lines += 1
        continue
      document = [l.strip() for l in text.split("\n") if l.strip()]
      if document:
        stats.lines += len(document)
        stats.documents += 1
        yield document


def iter_documents(input_file: InputFile,
                   stats: Optional[ReadStats] = None) -> Iterator[List[str]]:
  """Documents (non-empty lists of non-empty lines) of one input file."""
  stats = stats if stats is not None else ReadStats()
  if input_file.format == "jsonl":
    return _jsonl_documents(input_file.path, stats)
  return _text_documents(input_file.path, stats)


def language_sizes(files: Sequence[InputFile]) -> Dict[str, int]:
  """Bytes of input per language (the n_l of the sampling)."""
  sizes: Dict[str, int] = {}
  for f in files:
    sizes[f.language] = sizes.get(f.language, 0) + f.size()
  return sizes


def smoothed_language_probabilities(sizes: Mapping[str, float],
                                    alpha: float) -> Dict[str, float]:
  """q_l = p_l**alpha / sum(p**alpha), p_l = n_l / sum(n); zero sizes get 0."""
  if alpha < 0:
    raise InputError(f"language sampling alpha must be >= 0, got {alpha}.")
  total = float(sum(v for v in sizes.values() if v > 0))
  if total <= 0:
    raise InputError("all languages are empty: there is no text to sample.")
  weights = {l: (n / total) ** alpha if n > 0 else 0.0 for l, n in sizes.items()}
  norm = sum(weights.values())
  return {l: w / norm for l, w in weights.items()}
