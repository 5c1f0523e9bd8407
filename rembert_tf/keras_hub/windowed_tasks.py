"""Tagging and span QA in several rows per example, and predictions read back.

keras-hub's preprocessors give one row per example and its tasks' `predict`
logits; here long sentences and contexts continue in further rows (the
first is the preprocessor's own), in Python: `encode_tagged` /
`predict_tags` and `encode_spans` / `predict_answers` (BERT's SQuAD recipe).
docs/keras_hub.md shows their use.
"""
import dataclasses
from typing import Dict, List, Optional, Sequence

import numpy as np

IGNORED_LABEL = -1


@dataclasses.dataclass
class TaggedRow:
  """Where one encoded row's words are: `sentence`, its first word
  `word_start`, and the position of each word's first piece."""
  sentence: int
  word_start: int
  positions: List[int]


@dataclasses.dataclass
class TaggedFeatures:
  """Encoded sentences: backbone `inputs` ([rows, sequence_length] int32),
  per-piece `labels` (IGNORED_LABEL where no tag), and `rows`."""
  inputs: Dict[str, np.ndarray]
  labels: np.ndarray
  rows: List[TaggedRow]


def _pad(rows: List[List[int]], length: int, value: int) -> np.ndarray:
  out = np.full([len(rows), length], value, np.int32)
  for i, row in enumerate(rows):
    out[i, :len(row)] = row
  return out


def _tagged_rows(tokenizer, pieces, sentence_tags, room, split_long):
  """(tokens, labels, start word, first-piece positions) of each row."""
  start, rows = 0, []
  while start < len(pieces):
    end, used = start, 0
    while end < len(pieces) and used + len(pieces[end]) <= room:
      used += len(pieces[end])
      end += 1
    tokens, labels, positions = [tokenizer.cls_token_id], [IGNORED_LABEL], []
    for word in range(start, end):
      positions.append(len(tokens))
      tokens += pieces[word]
      first = IGNORED_LABEL if sentence_tags is None else int(
          sentence_tags[word])
      labels += [first] + [IGNORED_LABEL] * (len(pieces[word]) - 1)
    rows.append((tokens + [tokenizer.sep_token_id], labels + [IGNORED_LABEL],
                 start, positions))
    start = end
    if not split_long:
      break
  return rows


def encode_tagged(preprocessor, sentences: Sequence[Sequence[str]],
                  tags: Optional[Sequence[Sequence[int]]] = None,
                  split_long: bool = True) -> TaggedFeatures:
  """Sentences (lists of words) and optional tag ids -> `TaggedFeatures`.

  split_long: a sentence that does not fit continues in further rows;
    False keeps its first row only (the preprocessor's call).
  """
  tokenizer, length = preprocessor.tokenizer, preprocessor.sequence_length
  room = length - 2
  rows, token_rows, label_rows = [], [], []
  for index, words in enumerate(sentences):
    pieces = [(p or [tokenizer.unk_token_id])[:room]
              for p in tokenizer.piece_ids(list(words))]
    for tokens, labels, start, positions in _tagged_rows(
        tokenizer, pieces, None if tags is None else tags[index], room,
        split_long):
      rows.append(TaggedRow(index, start, positions))
      token_rows.append(tokens)
      label_rows.append(labels)
  token_ids = _pad(token_rows, length, tokenizer.pad_token_id)
  inputs = {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids),
            "padding_mask": _pad([[1] * len(r) for r in token_rows], length,
                                 0)}
  return TaggedFeatures(inputs, _pad(label_rows, length, IGNORED_LABEL), rows)


def predict_tags(tagger, sentences: Sequence[Sequence[str]],
                 batch_size: int = 32) -> List[List[int]]:
  """The tag id of every word of every sentence (long sentences are read in
  several rows; each word's tag is the argmax at its first piece)."""
  features = encode_tagged(tagger.preprocessor, sentences, split_long=True)
  logits = np.asarray(tagger.predict(features.inputs, batch_size=batch_size,
                                     verbose=0))
  tags = [[0] * len(words) for words in sentences]
  for row, located in enumerate(features.rows):
    for offset, position in enumerate(located.positions):
      tags[located.sentence][located.word_start + offset] = int(
          np.argmax(logits[row, position]))
  return tags


@dataclasses.dataclass
class SpanWindow:
  """One window: its `example`, where its context pieces begin in the row
  (`doc_offset`), their character spans in the context, and whether each is
  read in this window (`max_context`)."""
  example: int
  doc_offset: int
  char_starts: List[int]
  char_ends: List[int]
  max_context: List[bool]


@dataclasses.dataclass
class SpanFeatures:
  """Encoded windows: backbone `inputs`, answer `start_positions` /
  `end_positions` (0 without an answer in the window), the `windows`, and
  `skipped` training questions whose answer covers no piece."""
  inputs: Dict[str, np.ndarray]
  start_positions: np.ndarray
  end_positions: np.ndarray
  windows: List[SpanWindow]
  skipped: int = 0


def window_starts(num_pieces: int, max_length: int, stride: int) -> List[int]:
  """Starts of the windows of at most `max_length` pieces, every `stride`."""
  starts, offset = [], 0
  while offset < num_pieces:
    starts.append(offset)
    if offset + max_length >= num_pieces:
      break
    offset += min(max_length, stride)
  return starts


def is_max_context(starts: List[int], lengths: List[int], window: int,
                   piece: int) -> bool:
  """Whether `window` gives `piece` the most context among the windows that
  hold it: the larger of min(pieces left, pieces right), ties to the longer
  window (the rule of BERT's SQuAD code)."""
  best, best_score = None, None
  for index, (start, length) in enumerate(zip(starts, lengths)):
    if not start <= piece < start + length:
      continue
    context = min(piece - start, start + length - 1 - piece)
    score = context + 0.01 * length
    if best_score is None or score > best_score:
      best, best_score = index, score
  return best == window


def _answer_pieces(char_starts, char_ends, answer_start, answer_text):
  """(first, last) context piece covering the answer's characters, or None."""
  last_char = answer_start + len(answer_text) - 1
  covering = [i for i, (s, e) in enumerate(zip(char_starts, char_ends))
              if e >= answer_start and s <= last_char]
  return (covering[0], covering[-1]) if covering else None


def _windows(preprocessor, example, query, context_pieces, answer,
             at_least_one):
  """(tokens, doc offset, answer start, answer end, SpanWindow) of each
  window (an empty context has none, or, `at_least_one`, one without
  context pieces)."""
  tokenizer = preprocessor.tokenizer
  doc, char_starts, char_ends = context_pieces
  room = preprocessor.sequence_length - len(query) - 3
  if room <= 0:
    raise ValueError(
        f"sequence_length {preprocessor.sequence_length} leaves no room for "
        f"the context after a {len(query)}-piece question; raise "
        "sequence_length or lower max_query_length.")
  offsets = window_starts(len(doc), room, preprocessor.doc_stride)
  if at_least_one and not offsets:
    offsets = [0]
  lengths = [min(room, len(doc) - o) for o in offsets]
  doc_offset = len(query) + 2
  out = []
  for index, (offset, length) in enumerate(zip(offsets, lengths)):
    tokens = ([tokenizer.cls_token_id] + query + [tokenizer.sep_token_id]
              + doc[offset:offset + length] + [tokenizer.sep_token_id])
    start = end = 0
    if answer is not None and offset <= answer[0] and (
        answer[1] < offset + length):
      start, end = (answer[0] - offset + doc_offset,
                    answer[1] - offset + doc_offset)
    out.append((tokens, doc_offset, start, end, SpanWindow(
        example, doc_offset, char_starts[offset:offset + length],
        char_ends[offset:offset + length],
        [is_max_context(offsets, lengths, index, offset + i)
         for i in range(length)])))
  return out


def _pack_windows(rows, length, pad_id) -> Dict[str, np.ndarray]:
  shape = [len(rows), length]
  token_ids = np.full(shape, pad_id, np.int32)
  segment_ids = np.zeros(shape, np.int32)
  padding_mask = np.zeros(shape, np.int32)
  for i, (tokens, doc_offset) in enumerate(rows):
    token_ids[i, :len(tokens)] = tokens
    segment_ids[i, doc_offset:len(tokens)] = 1
    padding_mask[i, :len(tokens)] = 1
  return {"token_ids": token_ids, "segment_ids": segment_ids,
          "padding_mask": padding_mask}


def encode_spans(preprocessor, questions: Sequence[str],
                 contexts: Sequence[str],
                 answer_starts: Optional[Sequence[int]] = None,
                 answer_texts: Optional[Sequence[str]] = None,
                 one_window_each: bool = False) -> SpanFeatures:
  """Questions and contexts (and training answers) -> `SpanFeatures`.

  one_window_each: one row per example, as the preprocessor's call.
  """
  tokenizer = preprocessor.tokenizer
  rows, starts, ends, windows, skipped = [], [], [], [], 0
  query_pieces = tokenizer.piece_ids(list(questions))
  for example, (query, context) in enumerate(zip(query_pieces, contexts)):
    query = query[:preprocessor.max_query_length]
    context_pieces = tokenizer.tokenize_with_char_offsets(context)
    answer = None
    if answer_starts is not None:
      answer = _answer_pieces(context_pieces[1], context_pieces[2],
                              answer_starts[example], answer_texts[example])
      if answer is None and not one_window_each:
        skipped += 1
        continue
    kept = _windows(preprocessor, example, query, context_pieces, answer,
                    at_least_one=one_window_each)
    if one_window_each:
      kept = ([w for w in kept if w[2] > 0] or kept)[:1]
    for tokens, doc_offset, start, end, window in kept:
      rows.append((tokens, doc_offset))
      starts.append(start)
      ends.append(end)
      windows.append(window)
  return SpanFeatures(
      _pack_windows(rows, preprocessor.sequence_length,
                    tokenizer.pad_token_id),
      np.array(starts, np.int32), np.array(ends, np.int32), windows, skipped)


def predict_answers(qa, questions: Sequence[str], contexts: Sequence[str],
                    batch_size: int = 32, n_best_size: int = 20,
                    max_answer_length: int = 30) -> List[str]:
  """The answer text of each question ("" when no valid span), over every
  window of its context."""
  features = encode_spans(qa.preprocessor, questions, contexts)
  logits = qa.predict(features.inputs, batch_size=batch_size, verbose=0)
  starts = np.asarray(logits["start_logits"])
  ends = np.asarray(logits["end_logits"])
  best = [(None, "")] * len(questions)
  for row, window in enumerate(features.windows):
    for score, first, last in _window_spans(
        window, starts[row], ends[row], n_best_size, max_answer_length):
      if best[window.example][0] is None or score > best[window.example][0]:
        text = contexts[window.example][
            window.char_starts[first]:window.char_ends[last] + 1].strip()
        best[window.example] = (score, text)
  return [text for _, text in best]


def _top(logits, n_best_size):
  return np.argsort(-logits, kind="stable")[:n_best_size]


def _window_spans(window, start_logits, end_logits, n_best_size,
                  max_answer_length):
  """(score, first, last context piece) of the valid candidate spans."""
  pieces = len(window.char_starts)
  for start in _top(start_logits, n_best_size):
    first = int(start) - window.doc_offset
    if not 0 <= first < pieces or not window.max_context[first]:
      continue
    for end in _top(end_logits, n_best_size):
      last = int(end) - window.doc_offset
      if not first <= last < pieces or last - first + 1 > max_answer_length:
        continue
      yield float(start_logits[start] + end_logits[end]), first, last
