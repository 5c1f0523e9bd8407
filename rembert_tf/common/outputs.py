"""Outputs: one writer at a time, written under a temporary name and moved into place when complete.

Builds on `rembert_tf.common.fileio` (tf.io.gfile for `scheme://` paths), so
the same rule holds locally, on Cloud Storage and on TensorFlow's `ram://`:

- One writer per output (`writing_output`). The writer leaves a lock file
  `.NAME.lock-PID@HOST-XXXX` beside the output's real path (a symbolic link
  shares its target's lock), then lists the others: a live one makes it
  withdraw and fail with `OutputLockedError`, one line naming that run. A new
  file that appears whole and a listing that shows it are all this needs, so
  it holds on Cloud Storage, which has no exclusive create. A lock is stale
  when its run is gone: on this host its pid has ended; from another host it
  was not refreshed (a daemon thread rewrites it every `REFRESH_S`) for
  `STALE_AFTER_S`.
- An output is built under `.NAME.tmp-TAG` and moved into place when complete
  (`atomic_directory`; several files beside others: `atomic_file_set`). An
  existing one (only with --overwrite, `refuse_existing`) is first moved to
  `.NAME.old-TAG`; then one marker `.NAME.into-TAG` says the new output is
  complete and the old one wholly aside (`swap_in`). The next writer finishes
  a run killed at any point, even half-way through a directory that Cloud
  Storage moves object by object: with the marker the new output is moved in,
  without it the old one is moved back (`recover_interrupted_swap`).
- An output that is, holds or lies inside an input is refused before any work
  (`refuse_overlap`); local scratch space of a killed run is removed by the
  next (`local_scratch_dir`).

Example:
```python
from rembert_tf.common import fileio
from rembert_tf.common import outputs
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
import random
import secrets
import sys
import tempfile
import threading
import time
from typing import (Callable, Dict, Iterator, List, Mapping, Optional,
                    Sequence, Tuple)

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import worker_pool

PathLike = fileio.PathLike

STALE_AFTER_S = 300.0
REFRESH_S = 30.0
# A rival lock file younger than this may be a run that started at the same
# moment and withdraws too: look again after a random pause.
_COLLISION_WINDOW_S = 10.0
_MAX_TRIES = 4
_LOCK, _OLD, _INTO = ".lock-", ".old-", ".into-"


class OutputLockedError(errors.RemBertError, RuntimeError):
  """Another live run holds the output's lock."""


def is_chief_process() -> bool:
  """False on the non-chief workers of a multi-worker run (from TF_CONFIG):
  the chief (or worker 0 of a cluster without one) is its one writer."""
  try:
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
  except ValueError:
    return True
  task = config.get("task") or {}
  if task.get("type") in (None, "chief"):
    return True
  return (task.get("type") == "worker" and int(task.get("index", 0)) == 0
          and "chief" not in (config.get("cluster") or {}))


def pid_running(pid: int) -> bool:
  """True if a process (not a zombie) with this pid runs on this host."""
  if pid <= 0:
    return False
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    pass  # Another user's process: it runs.
  try:
    stat = fileio.read_bytes(f"/proc/{pid}/stat").decode("utf-8", "replace")
  except OSError:
    return True
  return not stat[stat.rfind(")") + 2:].startswith("Z")


# --- The lock ----------------------------------------------------------------------


def lock_location(path: PathLike) -> Tuple[str, str]:
  """(directory, name prefix) of the lock files of output `path`."""
  path = fileio.real_path(path).rstrip("/")
  return fileio.temporaries_dir(path), f".{fileio.basename(path)}{_LOCK}"


def _holders(path: str) -> List[Dict]:
  """Every lock file of output `path` (live and stale), oldest first."""
  parent, prefix = lock_location(path)
  try:
    names = [n for n in fileio.listdir(parent) if n.startswith(prefix)]
  except Exception:  # pylint: disable=broad-except
    return []  # No parent yet: no lock.
  found = []
  for name in names:
    lock_file = fileio.join(parent, name)
    try:
      text = fileio.read_text(lock_file)
    except Exception:  # pylint: disable=broad-except
      continue  # Released since the listing.
    try:
      info = dict(json.loads(text))
    except (ValueError, TypeError):
      info = {}  # Not written whole by a holder: stale.
    found.append(dict(info, lock_file=lock_file))
  return sorted(found, key=lambda h: float(h.get("since", 0)))


def _stale(holder: Dict, now: float) -> bool:
  if holder.get("host") != fileio.HOST:
    return now - float(holder.get("refreshed", 0)) > STALE_AFTER_S
  return not pid_running(int(holder.get("pid", -1)))


def _describe(holder: Dict, output: str) -> str:
  since = time.strftime("%Y-%m-%d %H:%M:%S",
                        time.localtime(float(holder.get("since", 0))))
  pid, host, lock_file = holder.get("pid"), holder.get("host"), holder["lock_file"]
  if host == fileio.HOST:
    return (f"{output} is being written by another run (pid {pid} on this "
            f"host, {host}, since {since}; lock file {lock_file}). Wait for it "
            "to end or stop it; the lock of a run that has ended is taken over "
            "by the next run.")
  age = max(0, int(time.time() - float(holder.get("refreshed", 0))))
  return (f"{output} is being written by another run (pid {pid} on host "
          f"{host}, since {since}, last refreshed {age}s ago; lock file "
          f"{lock_file}). Wait for it to end; if that run is gone, its lock is "
          f"taken over {int(STALE_AFTER_S)}s after its last refresh, or remove "
          "the lock file and run again.")


def owner_is_running(tag: str, path: PathLike) -> bool:
  """Whether the writer named by `tag` (`fileio.owner_tag`) may still write:
  on this host its pid runs; from another, it holds a live lock on `path`."""
  owner = fileio.parse_owner(tag)
  if owner is None:
    return False
  pid, host = owner
  if host == fileio.HOST:
    return pid_running(pid)
  now = time.time()
  return any(h.get("host") == host and h.get("pid") == pid and not _stale(h, now)
             for h in _holders(fileio.as_str(path)))


def _remove(path: str) -> None:
  with contextlib.suppress(Exception):  # Already gone.
    fileio.remove(path)


@contextlib.contextmanager
def _named_for_the_output(path: str, parent: str) -> Iterator[None]:
  """A parent that cannot be written (read-only, no permission) is named as
  the output's problem: the lock file is this module's detail."""
  try:
    yield
  except errors.user_error_types() as e:  # pylint: disable=catching-non-exception
    if isinstance(e, errors.RemBertError) or fileio.is_disk_full(e):
      raise  # A full disk is named by the writer's disk-full line.
    why = (e.strerror if isinstance(e, OSError) and e.strerror
           else errors.one_line(e).rsplit(": ", 1)[-1])
    raise errors.UsageError(
        f"{path}: cannot write this output ({why} in {parent}); choose an "
        "output on a file system and folder you can write to.") from None


def _makedirs(path: str) -> List[str]:
  """Creates `path` and its parents; returns the local ones it created."""
  created = []
  while not fileio.is_remote(path) and path and not fileio.isdir(path):
    created.append(path)
    path = fileio.dirname(path)
  fileio.makedirs(created[0] if created else path)
  return created


def _remove_created(created: List[str]) -> None:
  for directory in created:  # Innermost first, while empty.
    try:
      os.rmdir(directory)
    except OSError:
      return


def _collision_pause() -> None:
  time.sleep(random.uniform(0.05, 0.5))


def _acquire(path: str) -> Dict:
  parent, prefix = lock_location(path)
  with _named_for_the_output(path, parent):
    created = _makedirs(parent)
  for attempt in range(_MAX_TRIES):
    now = time.time()
    info = {"host": fileio.HOST, "pid": os.getpid(), "since": now,
            "refreshed": now, "output": path, "command": " ".join(sys.argv)[:500]}
    lock_file = fileio.join(
        parent, f"{prefix}{fileio.owner_tag()}-{secrets.token_hex(4)}")
    with _named_for_the_output(path, parent):
      fileio.write_text(lock_file, json.dumps(info, indent=1) + "\n")
    others = []
    for holder in _holders(path):
      if holder["lock_file"] != lock_file:
        if _stale(holder, now):
          _remove(holder["lock_file"])
        else:
          others.append(holder)
    if not others:
      return {"lock_file": lock_file, "info": info, "created": created,
              "count": 1, "lost": False}
    _remove(lock_file)
    if attempt + 1 < _MAX_TRIES and any(
        time.time() - float(h.get("since", 0)) < _COLLISION_WINDOW_S
        for h in others):
      _collision_pause()
      current = {h["lock_file"] for h in _holders(path)}
      if not any(h["lock_file"] in current for h in others):
        continue  # They withdrew too: a simultaneous start. Try again.
    _remove_created(created)
    raise OutputLockedError(_describe(others[0], path))
  raise AssertionError("unreachable")


_HELD: Dict[str, Dict] = {}
_MUTEX = threading.RLock()
_REFRESHER: List[threading.Thread] = []
if hasattr(os, "register_at_fork"):  # A forked worker holds nothing.
  os.register_at_fork(after_in_child=_HELD.clear)


def refresh_held_locks() -> None:
  """Rewrites this process's lock files with the time now (the daemon's job)."""
  with _MUTEX:
    for path, held in list(_HELD.items()):
      if held["lost"]:
        continue
      if not fileio.exists(held["lock_file"]):
        held["lost"] = True
        print(f"warning: the lock file {held['lock_file']} of {path} was "
              "removed by another process; another run may write there now.",
              file=sys.stderr, flush=True)
        continue
      held["info"]["refreshed"] = time.time()
      with contextlib.suppress(Exception):
        fileio.write_text(held["lock_file"],
                          json.dumps(held["info"], indent=1) + "\n")


def _refresh_forever() -> None:
  while True:
    time.sleep(REFRESH_S)
    refresh_held_locks()


@contextlib.contextmanager
def hold(path: PathLike) -> Iterator[bool]:
  """Holds the lock of output `path` for the block; raises OutputLockedError.

  Yields True when this call took it, False when this process already held
  it (nested). The output's parent is created if needed, and removed again
  when this created it and it stayed empty.
  """
  path = fileio.real_path(path).rstrip("/")
  with _MUTEX:
    taken = path not in _HELD
    if taken:
      _HELD[path] = _acquire(path)
      if not any(t.is_alive() for t in _REFRESHER):
        _REFRESHER[:] = [threading.Thread(target=_refresh_forever, daemon=True,
                                          name="rembert_tf-output-lock")]
        _REFRESHER[0].start()
    else:
      _HELD[path]["count"] += 1
  try:
    yield taken
  finally:
    with _MUTEX:
      held = _HELD[path]
      held["count"] -= 1
      if held["count"] == 0:
        del _HELD[path]
        _remove(held["lock_file"])
        _remove_created(held["created"])


def held_by_this_process(path: PathLike) -> bool:
  with _MUTEX:
    return fileio.real_path(path).rstrip("/") in _HELD


# --- Writing ------------------------------------------------------------------------


@contextlib.contextmanager
def writing_output(path: PathLike) -> Iterator[str]:
  """Holds the lock of output `path`; first finishes a swap a killed run left
  (`recover_interrupted_swap`) and removes temporaries of runs that are gone.
  Nests. Raises `OutputLockedError`, and errors.InputError when a parent of
  `path` is a file."""
  path = fileio.as_str(path).rstrip("/")
  fileio.check_output_location(path)
  with _disk_full_names(path), hold(path) as taken:
    if taken:
      recover_interrupted_swap(path)
    yield path


def writing_shared_output(path: PathLike, is_chief: Optional[bool] = None):
  """`writing_output(path)` on the chief alone (`is_chief` None: from
  TF_CONFIG); the other workers of one job write temporaries of their own."""
  if is_chief is None:
    is_chief = is_chief_process()
  return writing_output(path) if is_chief else contextlib.nullcontext()


def writes_output(argument: str) -> Callable:
  """Runs the decorated function in `writing_output(<its argument>)`; a call
  where that argument is None takes no lock."""
  def decorate(function: Callable) -> Callable:
    signature = inspect.signature(function)

    @functools.wraps(function)
    def wrapped(*args, **kwargs):
      # A worker re-running an unguarded script stops before writing anything.
      worker_pool.refuse_in_re_run(function.__name__)
      path = signature.bind(*args, **kwargs).arguments.get(argument)
      if path is None:
        return function(*args, **kwargs)
      with writing_output(path):
        return function(*args, **kwargs)
    return wrapped
  return decorate


def refuse_existing(paths: Sequence[str], overwrite: bool) -> None:
  """`errors.OutputExistsError` naming the first of `paths` that exists,
  unless `overwrite`."""
  for path in [] if overwrite else paths:
    if fileio.exists(path):
      raise errors.OutputExistsError(
          f"{path} already exists; choose another output or pass --overwrite "
          "to replace it (the old output stays until the new one is "
          "complete).")


def refuse_existing_members(directory: PathLike, names: Sequence[str],
                            overwrite: bool) -> None:
  """`refuse_existing` for the members of a file set of `directory`, checked
  under its lock (a replacement a killed run left is finished first)."""
  directory = fileio.as_str(directory).rstrip("/")
  if overwrite or not fileio.isdir(directory):
    return
  with writing_output(directory):
    refuse_existing([fileio.join(directory, n) for n in names], overwrite)


@contextlib.contextmanager
def atomic_directory(path: PathLike, overwrite: bool = False) -> Iterator[str]:
  """Yields a temporary directory that becomes `path` when the block completes.

  Holds the output's lock. An old `path` (only with `overwrite`, else
  errors.OutputExistsError) stays until the new one is complete; on an
  exception the temporary directory is removed and `path` is untouched.
  """
  path = fileio.as_str(path).rstrip("/")
  if fileio.temporaries_dir(path) == path:
    raise errors.UsageError(
        f"{path} is the root of a bucket, which cannot be swapped whole; "
        f"write the output into a folder of it (e.g. {path}/output).")
  with writing_output(path):
    refuse_existing([path], overwrite)
    with _staging(path) as tmp:
      yield tmp
    with _disk_full_names(path):
      swap_in(path, tmp)


@contextlib.contextmanager
def atomic_file_set(directory: PathLike, names: Sequence[str],
                    overwrite: bool = False) -> Iterator[str]:
  """Yields a staging directory; the members `names` (paths relative to
  `directory`, files or folders) written there replace those of `directory`
  as one set when the block completes: a kill or a full disk leaves the old
  set or the new one, never a mix. An old member the new set lacks goes with
  the old set; other files of `directory` are kept. Holds its lock; raises
  errors.OutputExistsError naming an existing member unless `overwrite`."""
  directory = fileio.as_str(directory).rstrip("/")
  with writing_output(directory):
    refuse_existing([fileio.join(directory, n) for n in names], overwrite)
    with _staging(directory) as tmp:
      yield tmp
    with _disk_full_names(directory):
      swap_in(directory, tmp, names, names)


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
  """A full disk reads as one line naming the output `path`."""
  try:
    yield
  except OSError as e:
    if fileio.is_disk_full(e):
      raise fileio.disk_full_error(path, e) from None
    raise


# --- Moving into place ----------------------------------------------------------------


def _companion(tmp: str, tag: str) -> str:
  """`.NAME.old-TAG` (or `.NAME.into-TAG`) of temporary `.NAME.tmp-TAG`."""
  parent, name = fileio.dirname(tmp), fileio.basename(tmp)
  head, _, owner = name.partition(fileio.TEMPORARY_TAG)
  return fileio.join(parent, f"{head}{tag}{owner}") if parent else head + tag + owner


def _move(src: str, dst: str) -> None:
  """Moves `src` to `dst`, or finishes such a move that was cut short."""
  if not fileio.exists(src):
    return
  if fileio.isdir(src) and fileio.exists(dst):
    fileio.merge_tree(src, dst)  # A tree moved object by object, half-way.
    return
  if fileio.dirname(dst):
    fileio.makedirs(fileio.dirname(dst))
  fileio.rename(src, dst, overwrite=True)


def swap_in(target: str, tmp: str, old_names: Optional[Sequence[str]] = None,
            new_names: Optional[Sequence[str]] = None) -> None:
  """Moves the complete new output in `tmp` (a `fileio.temporary_path`) into
  place: the whole directory `target`, or its members `new_names` replacing
  `old_names` (in that order). The old output goes to `.NAME.old-TAG` beside
  `tmp`, then the marker `.NAME.into-TAG` is written, then the new output
  moves in; the old copy and the marker go last. An error on the way finishes
  or undoes the swap at once; a kill leaves it to the next writer."""
  old, marker = _companion(tmp, _OLD), _companion(tmp, _INTO)
  if old_names is None:
    aside = [(target, old)]
    into = [(tmp, target)]
  else:
    aside = [(fileio.join(target, n), fileio.join(old, n)) for n in old_names]
    into = [(fileio.join(tmp, n), fileio.join(target, n)) for n in new_names]
  try:
    for src, dst in aside:
      _move(src, dst)
    with fileio.open_file(marker, "w") as f:
      f.write("the new output is complete and the old one aside\n")
    for src, dst in into:
      _move(src, dst)
    fileio.rmtree(old)
    fileio.rmtree(tmp)
    fileio.remove(marker)
  except Exception:
    with contextlib.suppress(Exception):  # Best effort; else the next writer.
      _finish(target, tmp)
    raise


def _finish(target: str, tmp: str) -> str:
  """Completes (with the marker) or undoes the swap of `tmp` into `target`."""
  old, marker = _companion(tmp, _OLD), _companion(tmp, _INTO)
  if fileio.exists(marker):
    _move(tmp, target)
    fileio.rmtree(old)
    outcome = "new"
  else:
    _move(old, target)
    fileio.rmtree(tmp)
    outcome = "old"
  if fileio.exists(marker):
    fileio.remove(marker)
  return outcome


def _beside(root: str, tag: str) -> List[str]:
  parent = fileio.temporaries_dir(root)
  prefix = f".{fileio.basename(root)}{tag}"
  if not fileio.isdir(parent or "."):
    return []
  return sorted(fileio.join(parent, n) for n in fileio.listdir(parent or ".")
                if n.startswith(prefix))


def recover_interrupted_swap(root: PathLike, target: Optional[PathLike] = None
                             ) -> None:
  """Finishes the swaps into `target` (default `root`) that killed runs left
  beside `root` (under the output's lock, so no live writer's), then removes
  the temporaries of writers that are gone. Each repair prints one line on
  stderr; several old copies without a marker are refused (InputError)."""
  root = fileio.as_str(root).rstrip("/")
  target = fileio.as_str(target or root).rstrip("/")
  as_tmp = lambda p, tag: p.replace(f".{fileio.basename(root)}{tag}",
                                    f".{fileio.basename(root)}{fileio.TEMPORARY_TAG}", 1)
  for marker in _beside(root, _INTO):
    _finish(target, as_tmp(marker, _INTO))
    _say(f"{target}: finished the replacement a killed run had begun (the new "
         "output is in place).")
  copies = _beside(root, _OLD)
  if len(copies) > 1:
    state = "is incomplete" if fileio.exists(target) else "is missing"
    raise errors.InputError(
        f"{target} {state} and {len(copies)} copies moved aside by killed "
        f"runs are beside it ({', '.join(copies)}); move the one to keep to "
        f"{target}, remove the others, and run again.")
  for copy_path in copies:
    _finish(target, as_tmp(copy_path, _OLD))
    _say(f"{target}: restored from {copy_path}, where a killed run had moved "
         "it.")
  remove_stale_temporaries(root, lock_of=target)


def remove_stale_temporaries(path: PathLike,
                             lock_of: Optional[PathLike] = None) -> List[str]:
  """Removes the `.NAME.tmp-*` beside `path` whose writer is gone
  (`owner_is_running` on output `lock_of`, default `path`); returns them."""
  path = fileio.as_str(path).rstrip("/")
  prefix = f".{fileio.basename(path)}{fileio.TEMPORARY_TAG}"
  removed = []
  for stale in _beside(path, fileio.TEMPORARY_TAG):
    writer = fileio.basename(stale)[len(prefix):].rsplit("-", 1)[0]
    if not owner_is_running(writer, lock_of or path):
      fileio.rmtree(stale)
      removed.append(stale)
  return removed


def _say(line: str) -> None:
  print(line, file=sys.stderr, flush=True)


# --- Rules before any work ---------------------------------------------------------------


def refuse_overlap(output: Optional[PathLike],
                   inputs: Mapping[str, Optional[PathLike]],
                   output_label: str = "the output") -> None:
  """errors.UsageError when `output` is, holds or lies inside one of
  `inputs` ({how the user named it, e.g. "--model_dir": path or None}),
  comparing real paths: writing it would replace or delete that input."""
  if output is None:
    return
  out = fileio.real_path(output).rstrip("/")
  for label, path in inputs.items():
    if path is None or not fileio.as_str(path):
      continue
    real = fileio.real_path(path).rstrip("/")
    if real == out:
      how = "is"
    elif real.startswith(out + "/"):
      how = "holds"
    elif out.startswith(real + "/"):
      how = "lies inside"
    else:
      continue
    raise errors.UsageError(
        f"{output_label} {fileio.as_str(output)} {how} {label} "
        f"{fileio.as_str(path)} (real paths {out} and {real}); writing it "
        f"would replace or delete that input. Choose {output_label} outside "
        f"{label}.")


@contextlib.contextmanager
def local_scratch_dir(prefix: str) -> Iterator[str]:
  """A local temporary directory `PREFIX<owner tag>-XXXX` (under TMPDIR) for
  libraries that need local files; those of ended runs go first."""
  root = tempfile.gettempdir()
  for name in os.listdir(root):
    owner = fileio.parse_owner(name[len(prefix):].rsplit("-", 1)[0])
    if name.startswith(prefix) and owner and owner[1] == fileio.HOST and (
        not pid_running(owner[0])):
      fileio.rmtree(os.path.join(root, name))
  path = tempfile.mkdtemp(prefix=f"{prefix}{fileio.owner_tag()}-", dir=root)
  try:
    yield path
  finally:
    fileio.rmtree(path)
