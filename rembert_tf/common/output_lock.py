"""One writer per output: a lock file beside the output names the run writing it.

Builds on `rembert_tf.common.fileio`. The writer of output `DIR/NAME` writes
its own lock file `DIR/.NAME.lock-PID@HOST-XXXX` (JSON), then lists the
others: a live one makes it remove its own and fail with `OutputLockedError`.
Writing before listing needs no exclusive create, which Cloud Storage lacks;
two runs that start together both withdraw and try again after a random pause.
The real path is locked (a symbolic link shares its target's lock). A lock is
stale when its run is gone: on this host its pid ended (or is another process
now); from another host it was not refreshed (every REFRESH_S) for
STALE_AFTER_S.

Example:
```python
from rembert_tf.common import output_lock
with output_lock.writing_output("records"):
  ...  # a second process asking for ./records gets OutputLockedError
```
"""
import contextlib
import json
import os
import random
import sys
import threading
import time
from typing import Dict, Iterator, List, Optional, Tuple

from rembert_tf.common import errors
from rembert_tf.common import fileio

PathLike = fileio.PathLike
STALE_AFTER_S = 300.0
REFRESH_S = 30.0
# A rival lock younger than this may be a run that started at the same moment
# and withdraws too: look again after a random pause.
_COLLISION_WINDOW_S = 10.0
_MAX_TRIES = 4
_LOCK = ".lock-"


class OutputLockedError(errors.RemBertError, RuntimeError):
  """Another live run holds the output's lock."""


def _proc_field(pid, index: int) -> Optional[str]:
  """Field `index` of /proc/PID/stat after "pid (command)" (Linux), else None
  (0: the state, 19: the start time in clock ticks since boot)."""
  try:
    stat = fileio.read_bytes(f"/proc/{pid}/stat").decode("utf-8", "replace")
  except OSError:
    return None
  fields = stat[stat.rfind(")") + 2:].split()
  return fields[index] if len(fields) > index else None


try:
  _BOOT_ID = fileio.read_text("/proc/sys/kernel/random/boot_id").strip()
except OSError:
  _BOOT_ID = None


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
  return _proc_field(pid, 0) != "Z"


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
      info = dict(json.loads(fileio.read_text(lock_file)))
    except (ValueError, TypeError):
      info = {}  # Not written whole by a holder: stale.
    except Exception:  # pylint: disable=broad-except
      continue  # Released since the listing.
    found.append(dict(info, lock_file=lock_file))
  return sorted(found, key=lambda h: float(h.get("since", 0)))


def _stale(holder: Dict, now: float) -> bool:
  if holder.get("host") != fileio.HOST:
    return now - float(holder.get("refreshed", 0)) > STALE_AFTER_S
  pid, start = int(holder.get("pid", -1)), holder.get("process_start")
  if holder.get("boot_id") not in (None, _BOOT_ID) or not pid_running(pid):
    return True
  return bool(start and start != _proc_field(pid, 19))


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
  if owner[1] == fileio.HOST:
    return pid_running(owner[0])
  now = time.time()
  return any((h.get("pid"), h.get("host")) == owner and not _stale(h, now)
             for h in _holders(fileio.as_str(path)))


def _remove(path: str) -> None:
  with contextlib.suppress(Exception):  # Already gone.
    fileio.remove(path)


@contextlib.contextmanager
def _named_for_the_output(path: str) -> Iterator[None]:
  """A full disk or an unwritable parent is named as the output's problem,
  not the lock file's."""
  try:
    yield
  except errors.user_error_types() as e:  # pylint: disable=catching-non-exception
    if isinstance(e, errors.RemBertError):
      raise
    if fileio.is_disk_full(e):
      raise fileio.disk_full_error(path, e) from None
    why = (e.strerror if isinstance(e, OSError) and e.strerror
           else errors.one_line(e).rsplit(": ", 1)[-1])
    raise errors.UsageError(
        f"{fileio.real_path(path)}: cannot write this output ({why} in "
        f"{lock_location(path)[0]}); choose an output on a file system and "
        "folder you can write to.") from None


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
  created = _makedirs(lock_location(path)[0])
  for attempt in range(_MAX_TRIES):
    now, pid = time.time(), os.getpid()
    info = {"host": fileio.HOST, "pid": pid, "since": now, "refreshed": now,
            "process_start": _proc_field(pid, 19), "boot_id": _BOOT_ID,
            "output": path, "command": " ".join(sys.argv)[:500]}
    lock_file = fileio.temporary_path(path, _LOCK)
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
def writing_output(path: PathLike) -> Iterator[str]:
  """Holds the lock of output `path` for the block (nests); raises
  OutputLockedError. The output's parent is created if needed, and removed
  again when this created it and it stayed empty."""
  path = fileio.as_str(path).rstrip("/")
  fileio.check_output_location(path)
  real = fileio.real_path(path).rstrip("/")
  with _MUTEX:
    if real in _HELD:
      _HELD[real]["count"] += 1
    else:
      with _named_for_the_output(path):
        _HELD[real] = _acquire(real)
      if not any(t.is_alive() for t in _REFRESHER):
        _REFRESHER[:] = [threading.Thread(target=_refresh_forever, daemon=True,
                                          name="rembert_tf-output-lock")]
        _REFRESHER[0].start()
  try:
    yield path
  except OSError as e:  # A command's own errors keep their words.
    if fileio.is_disk_full(e):
      raise fileio.disk_full_error(path, e) from None
    raise
  finally:
    with _MUTEX:
      held = _HELD[real]
      held["count"] -= 1
      if held["count"] == 0:
        del _HELD[real]
        _remove(held["lock_file"])
        _remove_created(held["created"])
