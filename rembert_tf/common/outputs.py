"""Outputs: written by one run at a time, built aside and swapped in whole.

A command's output (a directory of records, a checkpoint directory, an
export) is written by one run at a time (`writing_output`: the lock of
`output_lock`), built under a temporary sibling and swapped in when complete
(`atomic_directory`). The swap is journaled (`swap_in`): a run killed at any
point of it, even half-way through a directory that Cloud Storage renames
object by object, leaves the old or the new output whole, and the next writer
finishes or undoes it before anything else (`recover_interrupted_swap`).
Temporaries of writers that are gone are removed by
`remove_stale_temporaries`; those of a live process are kept. Every file
operation goes through `rembert_tf.common.fileio`.

The rules every command follows, in one place:
- an output of several files beside others in one directory is staged and
  published as one set by the same journaled swap (`atomic_file_set`);
- an existing output is replaced only with --overwrite (`refuse_existing`);
- an output that is, holds or lies inside one of the command's inputs is
  refused before any work, comparing real paths (`refuse_overlap`);
- local scratch space for libraries that need local files carries the run's
  owner tag, and a killed run's is removed by the next (`local_scratch_dir`).

Example:
```python
from rembert_tf.common import fileio
from rembert_tf.common import outputs
with outputs.writing_output("ram://demo/export"):
  with outputs.atomic_directory("ram://demo/export", overwrite=True) as tmp:
    fileio.write_text(fileio.join(tmp, "README"), "complete\\n")
assert fileio.exists("ram://demo/export/README")
```
"""
import contextlib
import functools
import inspect
import json
import os
import sys
import tempfile
from typing import (Callable, Iterator, List, Mapping, Optional, Sequence,
                    Tuple)

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import output_lock
from rembert_tf.common import worker_pool

PathLike = fileio.PathLike

_OLD_TAG = ".old-"
_SWAP_TAG = ".swap-"
_JOURNAL_SUFFIX, _MARKER_SUFFIX = ".json", ".into"


def _siblings(path: str, tag: str) -> List[str]:
  """The `.NAME{tag}*` entries beside `path`."""
  parent = fileio.temporaries_dir(path)
  prefix = f".{fileio.basename(path)}{tag}"
  if not fileio.isdir(parent or "."):
    return []
  return [fileio.join(parent, n) for n in fileio.listdir(parent or ".")
          if n.startswith(prefix)]


def remove_stale_temporaries(path: PathLike,
                             lock_of: Optional[PathLike] = None) -> List[str]:
  """Removes the `.NAME.tmp-*` siblings of `path` whose writer is gone.

  A temporary's name carries its writer (`PID@HOST`): it is kept while that
  process runs on this host or, from another host, while that writer holds
  a live lock on output `lock_of` (default `path`). Copies of an old output
  (`.NAME.old-*`) are never removed here: see `recover_interrupted_swap`.
  Returns what it removed.
  """
  path = fileio.as_str(path).rstrip("/")
  prefix = f".{fileio.basename(path)}{fileio.TEMPORARY_TAG}"
  removed = []
  for stale in _siblings(path, fileio.TEMPORARY_TAG):
    writer = fileio.basename(stale)[len(prefix):].rsplit("-", 1)[0]
    if not output_lock.owner_is_running(writer, lock_of or path):
      fileio.rmtree(stale)
      removed.append(stale)
  return removed


@contextlib.contextmanager
def writing_output(path: PathLike) -> Iterator[str]:
  """Holds the lock of output `path` and first finishes an interrupted swap.

  Every command that writes `path` runs in this block: a second run is
  refused with `output_lock.OutputLockedError` naming the first, a swap
  that a killed run left half-way is completed or rolled back
  (`recover_interrupted_swap`) and the temporaries of runs that are gone
  are removed (`remove_stale_temporaries`) before anything looks at `path`,
  also by a run that is then refused. Nests.
  Raises errors.InputError when a parent of `path` is a file.
  """
  path = fileio.as_str(path).rstrip("/")
  fileio.check_output_location(path)
  # A full disk, from the lock's own file on, is one line naming `path`.
  with _disk_full_names(path), output_lock.hold(path) as taken:
    if taken:
      recover_interrupted_swap(path)
      remove_stale_temporaries(path)
    yield path


def writing_shared_output(path: PathLike, is_chief: Optional[bool] = None):
  """`writing_output(path)` on the chief alone: when several workers run one
  job, the chief holds the output's lock and the others write temporaries of
  their own. `is_chief` None: from TF_CONFIG (`output_lock.is_chief_process`)."""
  if is_chief is None:
    is_chief = output_lock.is_chief_process()
  return writing_output(path) if is_chief else contextlib.nullcontext()


def writes_output(argument: str) -> Callable:
  """Runs the decorated function in `writing_output(<its argument>)`.

  `argument` names the parameter that holds the output path; a call where
  it is None writes no output and takes no lock.
  """
  def decorate(function: Callable) -> Callable:
    signature = inspect.signature(function)

    @functools.wraps(function)
    def wrapped(*args, **kwargs):
      # A worker process re-running an unguarded script stops here, before
      # it writes anything (the parent names the fix: the `__main__` guard).
      worker_pool.refuse_in_re_run(function.__name__)
      path = signature.bind(*args, **kwargs).arguments.get(argument)
      if path is None:
        return function(*args, **kwargs)
      with writing_output(path):
        return function(*args, **kwargs)
    return wrapped
  return decorate


@contextlib.contextmanager
def atomic_directory(path: PathLike, overwrite: bool = False) -> Iterator[str]:
  """Yields a temporary directory that becomes `path` when the block completes.

  Holds the output's lock (`writing_output`). The old `path` (with
  `overwrite`) is moved aside only after the new content is complete, and
  removed once the new one is in place (`swap_in`). On an exception the
  temporary directory is removed and `path` is untouched. Raises
  `errors.OutputExistsError` when `path` exists and `overwrite` is false,
  and `errors.InputError` when a parent of `path` is a file.
  """
  path = fileio.as_str(path).rstrip("/")
  if fileio.temporaries_dir(path) == path:
    raise errors.UsageError(
        f"{path} is the root of a bucket, which cannot be swapped whole; "
        f"write the output into a folder of it (e.g. {path}/output).")
  with writing_output(path):
    remove_stale_temporaries(path)
    if fileio.exists(path) and not overwrite:
      raise errors.OutputExistsError(
          f"{path} already exists; choose another output or pass --overwrite "
          "to replace it (the old output stays until the new one is complete).")
    with _staging(path) as tmp:
      yield tmp
    old = fileio.temporary_path(path, _OLD_TAG)
    with _disk_full_names(path):
      swap_in(path, aside=[(path, old)] if fileio.exists(path) else [],
              into=[(tmp, path)], new=[tmp],
              old=[old] + _siblings(path, _OLD_TAG))


@contextlib.contextmanager
def atomic_file_set(directory: PathLike, names: Sequence[str],
                    overwrite: bool = False) -> Iterator[str]:
  """Yields a staging directory; files `names` written there replace those
  of `directory` as one set when the block completes.

  For an output of several files beside others in one directory (a
  vocabulary's `.model`, `.vocab` and `.json`; a command's results and
  predictions). `names` are paths relative to `directory` (files or
  folders): every one of them that exists is moved aside and every staged
  one moved in by one journaled swap (`swap_in`), so a kill or a full disk
  at any moment leaves the old set or the new one, never a mix; an old
  member the new set lacks is removed with the old set. Other files of
  `directory` are kept. Holds the lock of `directory`. Raises
  `errors.OutputExistsError` naming the first existing member when
  `overwrite` is false.
  """
  directory = fileio.as_str(directory).rstrip("/")
  with writing_output(directory):
    remove_stale_temporaries(directory)
    refuse_existing([fileio.join(directory, n) for n in names], overwrite)
    with _staging(directory) as tmp:
      yield tmp
    old = fileio.temporary_path(directory, _OLD_TAG)
    member = lambda root, name: fileio.join(root, name)
    with _disk_full_names(directory):
      swap_in(directory,
              aside=[(member(directory, n), member(old, n)) for n in names
                     if fileio.exists(member(directory, n))],
              into=[(member(tmp, n), member(directory, n)) for n in names
                    if fileio.exists(member(tmp, n))],
              new=[tmp], old=[old])


def refuse_existing(paths: Sequence[str], overwrite: bool) -> None:
  """`errors.OutputExistsError` naming the first of `paths` that exists,
  unless `overwrite`: a command writes into an existing output only when
  asked to."""
  if overwrite:
    return
  for path in paths:
    if fileio.exists(path):
      raise errors.OutputExistsError(
          f"{path} already exists; choose another output or pass --overwrite "
          "to replace it (the old output stays until the new one is "
          "complete).")


def refuse_existing_members(directory: PathLike, names: Sequence[str],
                            overwrite: bool) -> None:
  """`refuse_existing` for the members of a file set of `directory`
  (`atomic_file_set`), as a command checks before any work: first, under
  the directory's lock, a replacement a killed run left half-way is
  finished or undone, so the check (and the user) sees one whole set."""
  directory = fileio.as_str(directory).rstrip("/")
  members = [fileio.join(directory, n) for n in names]
  if overwrite or not fileio.isdir(directory):
    return
  with writing_output(directory):
    refuse_existing(members, overwrite)


@contextlib.contextmanager
def _staging(path: str) -> Iterator[str]:
  """A new temporary directory beside `path`, removed when the block fails."""
  tmp = fileio.temporary_path(path)
  fileio.makedirs(tmp)
  try:
    yield tmp
  except BaseException as e:
    fileio.rmtree(tmp)
    if fileio.is_disk_full(e):
      raise fileio.disk_full_error(path, e) from None
    raise


@contextlib.contextmanager
def _disk_full_names(path: str) -> Iterator[None]:
  """A full disk while swapping in reads as one line naming `path`."""
  try:
    yield
  except OSError as e:
    if fileio.is_disk_full(e):
      raise fileio.disk_full_error(path, e) from None
    raise


def refuse_overlap(output: Optional[PathLike],
                   inputs: Mapping[str, Optional[PathLike]],
                   output_label: str = "the output") -> None:
  """Refuses, before any work, an output that is, holds or lies inside one
  of a command's inputs: writing it would replace or delete that input.

  `inputs` maps how the user named each input (a flag, e.g. "--model_dir")
  to its path (None: not given). Real paths are compared
  (`fileio.real_path`: a symbolic link counts as its target). Raises
  errors.UsageError naming both.
  """
  if output is None:
    return
  out = fileio.real_path(output).rstrip("/")
  for label, path in inputs.items():
    if path is None or not fileio.as_str(path):
      continue
    real = fileio.real_path(path).rstrip("/")
    if real == out:
      how = "is"
    elif _is_under(real, out):
      how = "holds"
    elif _is_under(out, real):
      how = "lies inside"
    else:
      continue
    raise errors.UsageError(
        f"{output_label} {fileio.as_str(output)} {how} {label} "
        f"{fileio.as_str(path)} (real paths {out} and {real}); writing it "
        f"would replace or delete that input. Choose {output_label} outside "
        f"{label}.")


def _is_under(path: str, directory: str) -> bool:
  return path.startswith(directory.rstrip("/") + "/")


@contextlib.contextmanager
def local_scratch_dir(prefix: str) -> Iterator[str]:
  """A local temporary directory for libraries that need local files.

  Named `PREFIX` + this run's owner tag under the system's temporary
  directory (TMPDIR); the scratch directories of the same prefix whose run
  has ended (a killed run's) are removed first. Removed when the block ends.
  """
  root = tempfile.gettempdir()
  for name in os.listdir(root):
    if name.startswith(prefix):
      tag = name[len(prefix):].rsplit("-", 1)[0]
      if fileio.parse_owner(tag) and not output_lock.owner_is_running(
          tag, os.path.join(root, name)):
        fileio.rmtree(os.path.join(root, name))
  path = tempfile.mkdtemp(prefix=f"{prefix}{fileio.owner_tag()}-", dir=root)
  try:
    yield path
  finally:
    fileio.rmtree(path)


def swap_in(path: PathLike, *, aside: Sequence[Tuple[str, str]],
            into: Sequence[Tuple[str, str]], new: Sequence[str] = (),
            old: Sequence[str] = ()) -> None:
  """Replaces output `path` by moves that a kill at any point cannot lose.

  `aside` moves (src, dst) take the old output out of the way, `into` moves
  bring the complete new one in; `new` (temporaries of the new output) and
  `old` (copies of the old one) are removed at the end. First a journal
  `.NAME.swap-*` beside `path` lists every move; once the old output is
  wholly aside a marker `.NAME.swap-*.into` is written. A swap cut short is
  finished by the next writer of `path` (`recover_interrupted_swap`): moved
  back without the marker, completed with it. All paths lie under the
  directory of `path`.
  """
  path = fileio.as_str(path).rstrip("/")
  journal = fileio.temporary_path(path, _SWAP_TAG) + _JOURNAL_SUFFIX
  parent = fileio.dirname(journal)
  relative = lambda p: _relative(p, parent)
  record = {"output": fileio.basename(path),
            "aside": [[relative(s), relative(d)] for s, d in aside],
            "into": [[relative(s), relative(d)] for s, d in into],
            "new": [relative(p) for p in new], "old": [relative(p) for p in old]}
  try:
    # Whole, or unreadable: nothing moved.
    with fileio.open_file(journal, "w") as f:
      f.write(json.dumps(record, indent=1) + "\n")
  except Exception:
    for temporary in new:
      fileio.rmtree(temporary)
    raise
  try:
    for src, dst in aside:
      _move(src, dst)
    with fileio.open_file(_marker_of(journal), "w") as f:
      f.write("the old output is aside\n")  # (ram:// drops empty files)
    _complete_swap(journal)
  except Exception:
    with contextlib.suppress(Exception):  # Best effort; else the next run.
      _complete_swap(journal)
    raise


def _marker_of(journal: str) -> str:
  return journal[:-len(_JOURNAL_SUFFIX)] + _MARKER_SUFFIX


def _relative(path: str, parent: str) -> str:
  if not parent:
    return path
  if not path.startswith(parent.rstrip("/") + "/"):
    raise ValueError(f"internal: {path} is not under {parent}")
  return path[len(parent.rstrip("/")) + 1:]


def _move(src: str, dst: str) -> None:
  """Moves `src` to `dst`, or finishes such a move that was cut short."""
  if not fileio.exists(src):
    return
  # A tree moved object by object, half-way.
  if fileio.isdir(src) and fileio.exists(dst):
    fileio.merge_tree(src, dst)
    return
  if fileio.dirname(dst):
    fileio.makedirs(fileio.dirname(dst))
  fileio.rename(src, dst, overwrite=True)


def _complete_swap(journal: str) -> Optional[str]:
  """Finishes the swap of `journal`; returns "new" or "old" (what is in place).

  With the marker every `into` move is (re)done; without it every `aside`
  move is undone. Then the journal's temporaries go, and the old copies too
  when the new output is in place (after a roll-back, only emptied ones).
  """
  parent, marker = fileio.dirname(journal), _marker_of(journal)
  try:
    record = json.loads(fileio.read_text(journal))
  except (ValueError, OSError):
    record = None  # Cut short while written: nothing was moved.
  full = lambda p: fileio.join(parent, p) if parent else p
  outcome = None
  if record is not None and fileio.exists(marker):
    for src, dst in record["into"]:
      _move(full(src), full(dst))
    for leftover in record["new"] + record["old"]:
      fileio.rmtree(full(leftover))
    outcome = "new"
  elif record is not None:
    for src, dst in reversed(record["aside"]):
      _move(full(dst), full(src))
    for leftover in record["new"]:
      fileio.rmtree(full(leftover))
    for copy_path in map(full, record["old"]):
      if fileio.isdir(copy_path) and not fileio.files_under(copy_path):
        fileio.rmtree(copy_path)
    outcome = "old"
  if fileio.exists(marker):
    fileio.remove(marker)
  fileio.remove(journal)
  return outcome


def recover_interrupted_swap(path: PathLike) -> None:
  """Puts `path` back in one piece after a writer was killed while swapping.

  Runs under the output's lock (`writing_output`), so no live writer's swap
  is touched. Each journal `.NAME.swap-*` is finished (`_complete_swap`). An
  old copy with no journal (`.NAME.old-*`) while `path` is missing is moved
  back when it is the only one; several are refused (errors.InputError
  naming them). Each repair prints one line on stderr.
  """
  path = fileio.as_str(path).rstrip("/")
  for journal in _siblings(path, _SWAP_TAG):
    if not journal.endswith(_JOURNAL_SUFFIX):
      continue  # A marker: its journal is finished below.
    try:
      outcome = _complete_swap(journal)
    except Exception as e:  # pylint: disable=broad-except
      raise errors.InputError(
          f"{path}: a run killed while replacing it left {journal}, which "
          f"lists where every file of the old and the new output is; "
          f"finishing it failed ({errors.one_line(e)}). Fix that and run "
          "again, or move the files back by hand.") from None
    if outcome:
      state = ("the new output is in place" if outcome == "new"
               else "the state before it is back")
      _say(f"{path}: finished the replacement a killed run had begun "
           f"({state}).")
  copies = _siblings(path, _OLD_TAG)
  if not copies or fileio.exists(path):
    return
  if len(copies) > 1:
    raise errors.InputError(
        f"{path} is missing and {len(copies)} copies moved aside by killed "
        f"runs are beside it ({', '.join(copies)}); move the one to keep to "
        f"{path}, remove the others, and run again.")
  fileio.rename(copies[0], path)
  _say(f"{path}: restored from {copies[0]}, where a killed run had moved it.")


def _say(line: str) -> None:
  print(line, file=sys.stderr, flush=True)


