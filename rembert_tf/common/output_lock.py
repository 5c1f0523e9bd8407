"""One writer per output: a lock file beside the output names the run writing it.

Two runs writing one output (two record creations into one directory, two
converts to one path, two trainings on one model_dir) would interleave their
files. The second is refused instead, with one line naming the first.

The lock of an output `DIR/NAME` is a file `DIR/.NAME.lock-PID@HOST-XXXX`
holding JSON: host, pid, the process's start time and boot id, the command
line, since and refreshed (seconds since the epoch). Taking it:

1. write this run's own lock file (a unique name: it appears whole, and no
   other process ever writes or replaces it);
2. list the output's lock files and remove the stale ones;
3. if another live one is left, remove ours and raise `OutputLockedError`.

Two runs that start at the same moment may each see the other's file: both
withdraw, and whichever tries again first (after a random pause) takes it.
They never both hold it: each wrote its file before listing, so the later
lister sees the earlier one. This needs only what every TensorFlow filesystem
offers (a new file appears whole; a listing shows every file written before
it), so it holds on Cloud Storage, which has no exclusive create.

A lock is stale when its holder is gone: on this host, its pid is not running
(or is another, newer process: other start time or boot); on another host
(a shared filesystem, a bucket), it was not refreshed for `STALE_AFTER_S`.
Holders refresh their lock files every `REFRESH_S` from a daemon thread.

A process holds a lock once, however often it asks (`hold` nests). Temporary
names carry their writer (`fileio.owner_tag()`), so a clean-up can tell a live
writer's files from a killed one's (`owner_is_running`). Multi-worker training
is one writer by design: the chief alone holds the lock of its model_dir.

Lock files are read and written through `fileio` (local paths without a
TensorFlow import, `tf.io.gfile` for `scheme://` paths); the `PID@HOST` tag
lock and temporary names carry is `fileio.owner_tag()`.

Example:
```python
from rembert_tf.common import output_lock
with output_lock.hold("records"):
  ...  # a second process asking for /tmp/records gets OutputLockedError
```
"""
import contextlib
import dataclasses
import json
import os
import posixpath
import random
import secrets
import sys
import threading
import time
from typing import Dict, Iterator, List, Optional, Tuple

from rembert_tf.common import errors
from rembert_tf.common import fileio

STALE_AFTER_S = 300.0
REFRESH_S = 30.0
# A competing lock file younger than this may be a run that started at the
# same moment and withdraws too: look again after a random pause.
_COLLISION_WINDOW_S = 10.0
_COLLISION_PAUSE_S = (0.05, 0.5)
_MAX_TRIES = 4
_LOCK_TAG = ".lock-"


class OutputLockedError(errors.RemBertError, RuntimeError):
  """Another live run holds the output's lock."""


def is_chief_process() -> bool:
  """False on the non-chief workers of a multi-worker run (from TF_CONFIG).

  The chief (or worker 0 of a cluster without one) is the one writer of a
  multi-worker run's outputs: only it takes their locks.
  """
  try:
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
  except ValueError:
    return True  # Not a cluster this process can be part of.
  kind = (config.get("task") or {}).get("type")
  index = int((config.get("task") or {}).get("index", 0))
  if kind in (None, "chief"):
    return True
  return kind == "worker" and index == 0 and "chief" not in (
      config.get("cluster") or {})


# --- This host's processes --------------------------------------------------------


def _read_local(path: str) -> Optional[str]:
  try:
    return fileio.read_bytes(path).decode("utf-8", errors="replace")
  except OSError:
    return None


_BOOT_ID = (_read_local("/proc/sys/kernel/random/boot_id") or "").strip() or None


def _process_start(pid: int) -> Optional[str]:
  """The process's start time in clock ticks since boot (Linux), else None."""
  stat = _read_local(f"/proc/{pid}/stat")
  if not stat:
    return None
  fields = stat[stat.rfind(")") + 2:].split()  # after "pid (command) "
  return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def pid_running(pid: int) -> bool:
  """True if a process (not a zombie) with this pid runs on this host."""
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    pass  # Another user's process: it runs.
  stat = _read_local(f"/proc/{pid}/stat")
  return not (stat and stat[stat.rfind(")") + 2:].startswith("Z"))


# --- Lock files on any filesystem ----------------------------------------------------


def _read(path: str) -> Optional[str]:
  try:
    return fileio.read_text(path)
  except Exception:  # pylint: disable=broad-except
    return None  # Gone since the listing (its holder released it).


def _remove(path: str) -> None:
  try:
    fileio.remove(path)
  except Exception:  # pylint: disable=broad-except
    pass  # Already removed (by its holder, or by another run taking over).


def _names_starting(parent: str, prefix: str) -> List[str]:
  try:
    names = fileio.listdir(parent)
  except Exception:  # pylint: disable=broad-except
    return []
  return [n for n in names if n.startswith(prefix)]


def _makedirs(path: str) -> List[str]:
  """Creates `path` and its parents; returns the local ones it created."""
  if fileio.is_remote(path):
    fileio.makedirs(path)
    return []
  created = []
  while path and not fileio.isdir(path):
    created.append(path)
    path = fileio.dirname(path)
  fileio.makedirs(created[0] if created else path)
  return created


# --- Lock files --------------------------------------------------------------------


def _normalize(path) -> str:
  """The output's real path: two names of one directory (a symbolic link)
  share one lock."""
  return fileio.real_path(os.fspath(path))


def lock_location(path) -> Tuple[str, str]:
  """(directory, name prefix) of the lock files of output `path`."""
  path = _normalize(path)
  if fileio.is_remote(path):
    scheme, rest = path.split("://", 1)
    parent, name = posixpath.split(rest)
    parent = f"{scheme}://{parent}" if parent else path  # a bucket: inside
  else:
    parent, name = os.path.split(path)
  return parent, f".{name}{_LOCK_TAG}"


@dataclasses.dataclass
class Holder:
  """One lock file of an output, as read."""
  lock_file: str
  host: str
  pid: int
  since: float
  refreshed: float
  process_start: Optional[str] = None
  boot_id: Optional[str] = None
  command: str = ""

  def stale(self, now: Optional[float] = None) -> bool:
    if self.host != fileio.HOST:
      return (now or time.time()) - self.refreshed > STALE_AFTER_S
    if self.boot_id and _BOOT_ID and self.boot_id != _BOOT_ID:
      return True  # This host rebooted since.
    if not pid_running(self.pid):
      return True
    start = _process_start(self.pid)
    return bool(self.process_start and start and start != self.process_start)

  def describe(self, output: str) -> str:
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
    if self.host == fileio.HOST:
      return (f"{output} is being written by another run (pid {self.pid} on "
              f"this host, {self.host}, since {since}; lock file "
              f"{self.lock_file}). Wait for it to end or stop it; the lock of "
              "a run that has ended is taken over by the next run.")
    age = max(0, int(time.time() - self.refreshed))
    return (f"{output} is being written by another run (pid {self.pid} on "
            f"host {self.host}, since {since}, last refreshed {age}s ago; lock "
            f"file {self.lock_file}). Wait for it to end; if that run is gone, "
            f"its lock is taken over {int(STALE_AFTER_S)}s after its last "
            "refresh, or remove the lock file and run again.")


def _read_holder(lock_file: str) -> Optional[Holder]:
  text = _read(lock_file)
  if text is None:
    return None
  try:
    info = json.loads(text)
    return Holder(lock_file, str(info["host"]), int(info["pid"]),
                  float(info["since"]), float(info["refreshed"]),
                  info.get("process_start"), info.get("boot_id"),
                  str(info.get("command", "")))
  except (ValueError, KeyError, TypeError):
    # Not a lock file this module wrote whole: no holder to name.
    return Holder(lock_file, "", -1, 0.0, 0.0)


def holders(path) -> List[Holder]:
  """Every lock file of output `path` (live and stale), oldest first."""
  parent, prefix = lock_location(path)
  found = [_read_holder(fileio.join(parent, n))
           for n in _names_starting(parent, prefix)]
  return sorted((h for h in found if h is not None), key=lambda h: h.since)


def owner_is_running(tag: str, path) -> bool:
  """Whether the writer named by `tag` (`fileio.owner_tag`) may still be writing.

  On this host: its pid runs. On another host: it holds a live lock on
  output `path`. A name without a writer tag is a killed run's.
  """
  owner = fileio.parse_owner(tag)
  if owner is None:
    return False
  pid, host = owner
  if host == fileio.HOST:
    return pid_running(pid)
  return any(h.host == host and h.pid == pid and not h.stale()
             for h in holders(path))


# --- Holding -----------------------------------------------------------------------


@dataclasses.dataclass
class _Held:
  lock_file: str
  info: Dict
  created: List[str]
  count: int = 1
  lost: bool = False


_HELD: Dict[str, _Held] = {}
_MUTEX = threading.RLock()
_REFRESHER: List[threading.Thread] = []
if hasattr(os, "register_at_fork"):  # POSIX: a forked worker holds nothing.
  os.register_at_fork(after_in_child=_HELD.clear)


def _claim(path: str, parent: str, prefix: str) -> Tuple[str, Dict]:
  now = time.time()
  info = {"host": fileio.HOST, "pid": os.getpid(),
          "process_start": _process_start(os.getpid()), "boot_id": _BOOT_ID,
          "since": now, "refreshed": now, "output": path,
          "command": " ".join(sys.argv)[:500]}
  lock_file = fileio.join(
      parent, f"{prefix}{fileio.owner_tag()}-{secrets.token_hex(4)}")
  fileio.write_text(lock_file, json.dumps(info, indent=1) + "\n")
  return lock_file, info


def _live_others(path: str, mine: str) -> List[Holder]:
  """Lock files of other live runs; stale ones are removed on the way."""
  live = []
  now = time.time()
  for holder in holders(path):
    if holder.lock_file == mine:
      continue
    if holder.stale(now):
      _remove(holder.lock_file)
    else:
      live.append(holder)
  return live


@contextlib.contextmanager
def _named_for_the_output(path: str, parent: str) -> Iterator[None]:
  """A parent that cannot be written (read-only, no permission) is named as
  the output's problem: the lock file is this module's detail."""
  try:
    yield
  except errors.user_error_types() as e:  # pylint: disable=catching-non-exception
    if isinstance(e, errors.RemBertError) or fileio.is_disk_full(e):
      raise  # a full disk is named by the writer (outputs' disk-full line)
    why = (e.strerror if isinstance(e, OSError) and e.strerror
           else errors.one_line(e).rsplit(": ", 1)[-1])
    raise errors.UsageError(
        f"{path}: cannot write this output ({why} in {parent}); choose an "
        "output on a file system and folder you can write to.") from None


def _acquire(path: str) -> _Held:
  parent, prefix = lock_location(path)
  with _named_for_the_output(path, parent):
    created = _makedirs(parent)
  for attempt in range(_MAX_TRIES):
    with _named_for_the_output(path, parent):
      lock_file, info = _claim(path, parent, prefix)
    others = _live_others(path, lock_file)
    if not others:
      return _Held(lock_file, info, created)
    _remove(lock_file)
    young = [h for h in others if time.time() - h.since < _COLLISION_WINDOW_S]
    if young and attempt + 1 < _MAX_TRIES:
      _collision_pause()
      current = {h.lock_file for h in holders(path)}
      if not any(h.lock_file in current for h in others):
        continue  # They withdrew too: a simultaneous start. Try again.
    _remove_created(created)
    raise OutputLockedError(others[0].describe(path))
  raise AssertionError("unreachable")


def _collision_pause() -> None:
  time.sleep(random.uniform(*_COLLISION_PAUSE_S))


def _remove_created(created: List[str]) -> None:
  """Removes the directories taking the lock created, while they are empty."""
  for directory in created:
    try:
      os.rmdir(directory)
    except OSError:
      return


def refresh_held_locks() -> None:
  """Rewrites this process's lock files with the time now (the daemon's job)."""
  with _MUTEX:
    for path, held in list(_HELD.items()):
      if held.lost:
        continue
      if _read(held.lock_file) is None:
        held.lost = True
        print(f"warning: the lock file {held.lock_file} of {path} was removed "
              "by another process; another run may write there now.",
              file=sys.stderr, flush=True)
        continue
      held.info["refreshed"] = time.time()
      with contextlib.suppress(Exception):
        fileio.write_text(held.lock_file, json.dumps(held.info, indent=1) + "\n")


def _refresh_forever() -> None:
  while True:
    time.sleep(REFRESH_S)
    refresh_held_locks()


def _start_refresher() -> None:
  if not any(t.is_alive() for t in _REFRESHER):
    thread = threading.Thread(target=_refresh_forever, daemon=True,
                              name="rembert_tf-output-lock")
    thread.start()
    _REFRESHER[:] = [thread]


@contextlib.contextmanager
def hold(path) -> Iterator[bool]:
  """Holds the lock of output `path` for the block; raises OutputLockedError.

  Yields True when this call took the lock, False when this process already
  held it (an outer `hold` of the same path). The lock file's directory (the
  output's parent) is created if needed.
  """
  path = _normalize(path)
  with _MUTEX:
    held = _HELD.get(path)
    if held is not None:
      held.count += 1
    else:
      _HELD[path] = _acquire(path)
      _start_refresher()
  try:
    yield held is None
  finally:
    with _MUTEX:
      held = _HELD[path]
      held.count -= 1
      if held.count == 0:
        del _HELD[path]
        _remove(held.lock_file)
        _remove_created(held.created)


def held_by_this_process(path) -> bool:
  with _MUTEX:
    return _normalize(path) in _HELD
