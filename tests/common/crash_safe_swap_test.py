"""Crash-safe swap: a run killed at any step of `--overwrite` loses neither the old nor the new output.

Each step of a swap (every rename, the marker's write, every removal) is
made to fail in turn, the way a kill would: a `Killed` exception that no
handler of the code under test catches. Every such run is followed by a rerun
without `--overwrite` (refused: the old or the new output is there, whole)
and one with it (the newest output, whole, nothing left beside it). Local
paths and ram:// (which, like gs://, renames a directory object by object).
"""
import os
import subprocess
import sys

import pytest
import tensorflow as tf

import testlib
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import output_lock
from rembert_tf.common import output_sets
from rembert_tf.common import outputs
from rembert_tf.data import pretraining_record_creation

OLD = {"a.txt": b"old a", "sub/b.txt": b"old b"}
NEW = {"a.txt": b"new a", "sub/b.txt": b"new b", "sub/c.txt": b"new c"}
NEWER = {"z.txt": b"newest"}


Killed, StepFaults = testlib.Killed, testlib.StepFaults


def _roots(tmp_path):
  counter = iter(range(10 ** 6))
  return {"local": lambda: str(tmp_path / f"r{next(counter)}"),
          "ram": lambda: f"ram://swap_test/{tmp_path.name}/r{next(counter)}"}


def _tree(path):
  """{relative path: content} of every file under `path`."""
  path = str(path).rstrip("/")
  files = {}
  for parent, _, names in tf.io.gfile.walk(path):
    for name in names:
      full = fileio.join(parent, name)
      files[full[len(path) + 1:]] = fileio.read_bytes(full)
  return files


def _write_directory(out, files, overwrite, faults=None):
  with outputs.atomic_directory(out, overwrite=overwrite) as tmp:
    for name, text in files.items():
      fileio.write_bytes(fileio.join(tmp, name), text)
    if faults:
      faults.armed = True


def _killed_overwrite(monkeypatch, write, step):
  """Runs `write(faults)` failing at `step`; True if it was killed there.

  From then on this process's pid counts as gone (the killed run's was).
  """
  with monkeypatch.context() as patch:
    faults = StepFaults(patch, at=step)
    try:
      write(faults)
    except Killed:
      pass
  if faults.count < step:
    return False
  running = output_lock.pid_running
  monkeypatch.setattr(output_lock, "pid_running",
                      lambda pid: pid != os.getpid() and running(pid))
  return True


@pytest.mark.parametrize("filesystem", ["local", "ram"])
def test_a_directory_swap_killed_at_every_step(filesystem, tmp_path, monkeypatch,
                                               capsys):
  new_root = _roots(tmp_path)[filesystem]
  outcomes = []
  for step in range(1, 100):
    for rerun_overwrites in (False, True):
      root = new_root()
      out = fileio.join(root, "out")
      _write_directory(out, OLD, overwrite=False)
      killed = _killed_overwrite(
          monkeypatch, lambda f: _write_directory(out, NEW, True, f), step)
      if not killed:
        break
      swap_left = any(".out.old-" in n or ".out.into-" in n
                      for n in fileio.listdir(root))
      if rerun_overwrites:
        _write_directory(out, NEWER, overwrite=True)
        assert _tree(out) == NEWER, step
      else:
        with pytest.raises(errors.OutputExistsError):
          _write_directory(out, NEWER, overwrite=False)
        outcomes.append("old" if _tree(out) == OLD else "new")
        assert _tree(out) in (OLD, NEW), step
      assert fileio.listdir(root) == ["out"], step
      err = capsys.readouterr().err  # Completed, or the old output put back:
      repaired = ("finished the replacement a killed run had begun" in err
                  or "where a killed run had moved it" in err)
      assert repaired == swap_left, step
    if not killed:
      break
  # The move(s) aside, the marker, the move(s) in, the clean-up: old before
  # the marker, new after it.
  assert step > (6 if filesystem == "local" else 10)
  assert outcomes == sorted(outcomes, reverse=True) and {"old", "new"} <= set(outcomes)


@pytest.mark.parametrize("filesystem", ["local", "ram"])
def test_records_swap_killed_at_every_step(filesystem, tmp_path, monkeypatch):
  new_root = _roots(tmp_path)[filesystem]
  shape = dict(seq_length=16, max_predictions_per_seq=3, vocab_size=100, num_shards=3)
  examples = [[10 + i, 11, 12] for i in range(12)]

  def write(out, seed, overwrite, faults=None):
    if faults:
      original = pretraining_record_creation.swap_in_records

      def armed(*args):
        faults.armed = True
        original(*args)
      monkeypatch.setattr(pretraining_record_creation, "swap_in_records", armed)
    try:
      pretraining_record_creation.write_pretraining_records(
          out, examples, seed=seed, overwrite=overwrite, **shape)
    finally:
      if faults:
        monkeypatch.setattr(pretraining_record_creation, "swap_in_records", original)

  for step in range(1, 100):
    for rerun_overwrites in (False, True):
      root = new_root()
      out = fileio.join(root, "records")
      fileio.write_text(fileio.join(out, "notes.txt"), "kept")
      write(out, 1, False)
      old = _tree(out)
      write(fileio.join(root, "expected"), 2, False)
      new = dict(_tree(fileio.join(root, "expected")), **{"notes.txt": b"kept"})
      fileio.rmtree(fileio.join(root, "expected"))
      killed = _killed_overwrite(monkeypatch, lambda f: write(out, 2, True, f), step)
      if not killed:
        break
      if rerun_overwrites:
        write(out, 3, True)
        assert _tree(out) not in (old, new) and len(_tree(out)) == 5, step
      else:
        with pytest.raises(errors.OutputExistsError, match="already holds"):
          write(out, 3, False)
        assert _tree(out) in (old, new), step
      assert fileio.listdir(root) == ["records"], step
      assert sorted(_tree(out)) == sorted(old), step  # No staging, no old copy.
    if not killed:
      break
  assert step > (3 + 3 + 5 if filesystem == "local" else 11)


def test_a_failed_rename_is_undone_or_finished_at_once(tmp_path, monkeypatch):
  """An error (not a kill) inside the swap: the output is whole when it is raised."""
  for step in range(1, 7):
    out = str(tmp_path / f"out{step}")
    _write_directory(out, OLD, overwrite=False)
    with monkeypatch.context() as patch:
      faults = StepFaults(patch, at=step, fault=OSError)
      try:
        _write_directory(out, NEW, True, faults)
      except OSError:
        pass
    assert _tree(out) in (OLD, NEW), step
  assert sorted(os.listdir(tmp_path)) == [f"out{i}" for i in range(1, 7)]


def test_an_old_copy_without_output_is_restored(tmp_path, capsys):
  out = str(tmp_path / "export")
  _write_directory(out, OLD, overwrite=False)
  os.rename(out, tmp_path / ".export.old-123-abcd")  # An older run, killed.
  with pytest.raises(errors.OutputExistsError):
    _write_directory(out, NEW, overwrite=False)
  assert _tree(out) == OLD and os.listdir(tmp_path) == ["export"]
  assert (f"{out}: restored from {tmp_path}/.export.old-123-abcd, where a "
          "killed run had moved it.") in capsys.readouterr().err
  os.rename(out, tmp_path / ".export.old-1-a")
  os.makedirs(tmp_path / ".export.old-2-b")
  with pytest.raises(errors.InputError, match=r"export is missing and 2 copies "
                     r"moved aside by killed runs are beside it \(.*old-1-a, "
                     r".*old-2-b\); move the one to keep to .*export"):
    _write_directory(out, NEW, overwrite=True)
  assert _tree(str(tmp_path / ".export.old-1-a")) == OLD


def test_a_killed_writers_temporaries_are_removed_by_the_next(tmp_path):
  out = str(tmp_path / "out")
  _write_directory(out, OLD, overwrite=False)
  (tmp_path / ".out.tmp-99@elsewhere-bbbb").mkdir()
  _write_directory(out, NEW, overwrite=True)
  assert _tree(out) == NEW and os.listdir(tmp_path) == ["out"]


def test_a_replacement_that_cannot_be_finished_is_one_line(tmp_path,
                                                           monkeypatch):
  out = str(tmp_path / "out")
  (tmp_path / ".out.tmp-99@elsewhere-bbbb").mkdir()
  (tmp_path / ".out.tmp-99@elsewhere-bbbb" / "a.txt").write_text("new")
  (tmp_path / ".out.into-99@elsewhere-bbbb").write_text("complete")

  rename = fileio.rename

  def forbidden(src, dst):
    if ".out.tmp-99" in src:
      raise PermissionError(13, "Permission denied", src)
    rename(src, dst)
  monkeypatch.setattr(fileio, "rename", forbidden)
  with pytest.raises(errors.InputError) as refused:
    _write_directory(out, NEW, overwrite=True)
  line = errors.one_line(refused.value)
  assert line.startswith(f"{out}: a run killed while replacing it left its old "
                         f"files in {tmp_path}/.out.old-99@elsewhere-bbbb and its "
                         f"new ones in {tmp_path}/.out.tmp-99@elsewhere-bbbb; "
                         "finishing that failed ("), line
  monkeypatch.undo()
  with pytest.raises(errors.OutputExistsError):  # The next run finishes it.
    _write_directory(out, NEW, overwrite=False)
  assert _tree(out) == {"a.txt": b"new"} and os.listdir(tmp_path) == ["out"]


def test_old_records_moved_aside_are_put_back_and_count_as_present(tmp_path):
  out = tmp_path / "records"
  shape = dict(seq_length=16, max_predictions_per_seq=3, vocab_size=100)
  pretraining_record_creation.write_pretraining_records(out, [[10, 11]] * 4, **shape)
  before = {p.name: p.read_bytes() for p in out.iterdir()}
  aside = out / ".create_pretraining_data.old-4242"  # An older run, killed.
  aside.mkdir()
  for name in pretraining_record_creation.existing_records(out):
    os.rename(out / name, aside / name)
  with pytest.raises(errors.OutputExistsError,
                     match=r"already holds pre-training records \(metadata.json"):
    pretraining_record_creation.write_pretraining_records(out, [[20, 21]] * 4, **shape)
  assert {p.name: p.read_bytes() for p in out.iterdir()} == before
  pretraining_record_creation.write_pretraining_records(out, [[20, 21]] * 4,
                                                overwrite=True, **shape)
  assert sorted(os.listdir(out)) == ["metadata.json", "pretrain-00000-of-00001.tfrecord"]


# Makes records over existing ones with --overwrite and exits the process right
# after the third rename into the old-records folder.
_KILLED_RECORDS_RUN = r"""
import os, sys
from rembert_tf.common import fileio
from rembert_tf.data import pretraining_record_creation
corpus, model, out = sys.argv[1:]
original, into_old = fileio.rename, []
def rename(src, dst):
  original(src, dst)
  if ".create_pretraining_data.old-" in dst:
    into_old.append(dst)
    if len(into_old) == 3:
      os._exit(9)
fileio.rename = rename
pretraining_record_creation.create_pretraining_data(
    [corpus + "/{lang}/*.txt"], out, model, languages=["el", "ar"], seq_length=32,
    max_predictions_per_seq=5, num_output_shards=3, seed=2, overwrite=True,
    verbose=False)
"""


def test_records_of_a_run_killed_in_its_swap_survive_the_next_runs(tmp_path,
                                                                   monkeypatch):
  corpus, model = testlib.demo_corpus_dir(), testlib.sentencepiece_model()
  out = tmp_path / "records"

  def run(seed, overwrite):
    return pretraining_record_creation.create_pretraining_data(
        [f"{corpus}/{{lang}}/*.txt"], out, model, languages=["el", "ar"],
        seq_length=32, max_predictions_per_seq=5, num_output_shards=3,
        seed=seed, overwrite=overwrite, verbose=False)

  run(1, False)
  old = {p.name: p.read_bytes() for p in out.iterdir()}
  killed = subprocess.run(
      [sys.executable, "-c", _KILLED_RECORDS_RUN, str(corpus), str(model), str(out)],
      env=dict(os.environ, PYTHONPATH=str(testlib.REPO)), capture_output=True,
      text=True, check=False)
  assert killed.returncode == 9, killed.stderr[-2000:]
  assert not (out / "metadata.json").exists()  # The old records are aside.
  with pytest.raises(errors.OutputExistsError, match="already holds"):
    run(3, False)
  assert {p.name: p.read_bytes() for p in out.iterdir()} == old
  with monkeypatch.context() as patch:  # Killed again, in its own swap.
    faults = StepFaults(patch, at=3)
    original = pretraining_record_creation.swap_in_records
    patch.setattr(pretraining_record_creation, "swap_in_records",
                  lambda *a: (setattr(faults, "armed", True), original(*a)))
    with pytest.raises(Killed):
      run(3, True)
  with pytest.raises(errors.OutputExistsError):
    run(3, False)
  assert {p.name: p.read_bytes() for p in out.iterdir()} == old
  meta = run(3, True)
  assert meta["seed"] == 3 and sorted(os.listdir(tmp_path)) == ["records"]


# An output of several files beside others in one directory (a vocabulary's
# trio, a command's results and predictions): one set, swapped in whole.
SET_OLD = {"v.model": b"old model", "v.vocab": b"old vocab",
           "preds/a.tsv": b"old a"}
SET_NEW = {"v.model": b"new model", "v.vocab": b"new vocab",
           "preds/b.tsv": b"new b", "v.json": b"new json"}
SET_NAMES = ("v.model", "v.vocab", "v.json", "preds")
OTHER = {"logs/run.log": b"kept", "notes.txt": b"kept too"}


def _write_set(out, files, overwrite, faults=None):
  with output_sets.atomic_file_set(out, SET_NAMES, overwrite=overwrite) as tmp:
    if faults:
      faults.armed = True  # Every write of the set and of its swap.
    for name, text in files.items():
      fileio.write_bytes(fileio.join(tmp, name), text)


def _set_fixture(root):
  out = fileio.join(root, "out")
  for name, text in OTHER.items():
    fileio.write_bytes(fileio.join(out, name), text)
  _write_set(out, SET_OLD, overwrite=False)
  return out


@pytest.mark.parametrize("filesystem", ["local", "ram"])
def test_a_file_set_killed_at_every_step_is_the_old_or_the_new(
    filesystem, tmp_path, monkeypatch):
  new_root = _roots(tmp_path)[filesystem]
  outcomes = []
  for step in range(1, 200):
    root = new_root()
    out = _set_fixture(root)
    if not _killed_overwrite(
        monkeypatch, lambda f, out=out: _write_set(out, SET_NEW, True, f), step):
      break
    with pytest.raises(errors.OutputExistsError, match="--overwrite"):
      _write_set(out, {"v.model": b"x"}, overwrite=False)
    tree = _tree(out)
    outcomes.append("old" if tree == dict(OTHER, **SET_OLD) else "new")
    assert tree in (dict(OTHER, **SET_OLD), dict(OTHER, **SET_NEW)), step
    assert fileio.listdir(root) == ["out"], (step, fileio.listdir(root))
    _write_set(out, {"v.model": b"newest"}, overwrite=True)
    assert _tree(out) == dict(OTHER, **{"v.model": b"newest"}), step
  assert step > 8 and {"old", "new"} <= set(outcomes)
  assert outcomes == sorted(outcomes, reverse=True)  # old, then new.


@pytest.mark.parametrize("filesystem", ["local", "ram"])
def test_a_full_disk_at_every_write_of_a_file_set(filesystem, tmp_path,
                                                  monkeypatch):
  """ENOSPC at each write and rename (a removal frees space): one line
  naming the output, and the old set or the new one, never a mix (the next
  run finishes a swap left half-way)."""
  new_root = _roots(tmp_path)[filesystem]
  for step in range(1, 200):
    root = new_root()
    out = _set_fixture(root)
    with monkeypatch.context() as patch:
      faults = StepFaults(patch, at=step, fault=testlib.disk_full,
                          names=("rename", "open_file"))
      try:
        _write_set(out, SET_NEW, True, faults)
      except errors.InputError as e:
        assert str(e).startswith(f"{out}: writing it failed: no space left "
                                 "on the device."), (step, e)
    if faults.count < step:
      break
    with pytest.raises(errors.OutputExistsError):  # Finishes a swap left.
      _write_set(out, {"v.model": b"x"}, overwrite=False)
    assert _tree(out) in (dict(OTHER, **SET_OLD), dict(OTHER, **SET_NEW)), step
    assert fileio.listdir(root) == ["out"], (step, fileio.listdir(root))
  assert step > 8
