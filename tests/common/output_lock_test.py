"""One writer per output: the lock beside an output, its take-over, and the clean-up it guards."""
import json
import os
import subprocess
import sys
import time

import pytest

import testlib
from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.common import output_lock
from rembert_tf.runtime import strategies


def _lock_files(path):
  parent, prefix = output_lock.lock_location(path)
  return [n for n in fileio.listdir(parent) if n.startswith(prefix)]


def _write_lock_file(path, host, pid, refreshed, since=None):
  """A lock file as another run would have written it."""
  parent, prefix = output_lock.lock_location(path)
  lock_file = fileio.join(parent, f"{prefix}{pid}@{host}-0000")
  fileio.write_json(lock_file, {"host": host, "pid": pid, "since": since or refreshed,
                                "refreshed": refreshed})
  return lock_file


def test_a_second_writer_is_refused_naming_the_holder(tmp_path):
  out = tmp_path / "records"
  with testlib.held_by_another_process(out) as (pid, _):
    with pytest.raises(output_lock.OutputLockedError) as refused:
      with output_lock.writing_output(out):
        pass
    message = str(refused.value)
    assert f"{out} is being written by another run (pid {pid} on this host, " \
           f"{fileio.HOST}, since " in message
    (lock_file,) = _lock_files(out)
    assert f"lock file {tmp_path / lock_file})" in message
    assert "Wait for it to end or stop it" in message and "\n" not in message
    assert lock_file.startswith(f".records.lock-{pid}@{fileio.HOST}-")
  with output_lock.writing_output(out):  # Released when the holder ended.
    (mine,) = _lock_files(out)
    info = json.loads((tmp_path / mine).read_text())
    assert (info["host"], info["pid"]) == (fileio.HOST, os.getpid())
  assert _lock_files(out) == []


def test_the_lock_of_a_killed_run_is_taken_over(tmp_path):
  out = tmp_path / "export"
  killed = subprocess.Popen(
      [sys.executable, "-c", "import os, sys\n"
       "from rembert_tf.common import output_lock\n"
       "held = output_lock.writing_output(sys.argv[1])\nheld.__enter__()\nos._exit(9)", str(out)],
      env=dict(os.environ, PYTHONPATH=str(testlib.REPO)))
  assert killed.wait() == 9
  (left,) = _lock_files(out)
  assert left.startswith(f".export.lock-{killed.pid}@{fileio.HOST}-")
  with output_lock.writing_output(out):
    assert left not in _lock_files(out) and len(_lock_files(out)) == 1


@pytest.mark.parametrize("root", ["local", "ram"])
def test_another_hosts_lock_holds_until_it_is_not_refreshed(root, tmp_path):
  base = str(tmp_path) if root == "local" else "ram://output_lock_test/host"
  out = fileio.join(base, "model_dir")
  fileio.makedirs(base)
  lock_file = _write_lock_file(out, "tpu-vm-7", 4242, time.time() - 30)
  with pytest.raises(output_lock.OutputLockedError,
                     match=r"pid 4242 on host tpu-vm-7, since .* last refreshed "
                           r"3\ds ago; lock file .*model_dir.lock-4242@tpu-vm-7"):
    with output_lock.writing_output(out):
      pass
  assert fileio.exists(lock_file)
  _write_lock_file(out, "tpu-vm-7", 4242,
                   time.time() - output_lock.STALE_AFTER_S - 1)
  with output_lock.writing_output(out):
    assert not fileio.exists(lock_file)


def test_a_dead_pid_of_this_host_is_stale_a_live_one_is_not(tmp_path):
  finished = subprocess.Popen([sys.executable, "-c", "pass"])
  finished.wait()
  dead = _write_lock_file(tmp_path / "a", fileio.HOST, finished.pid, time.time())
  live = _write_lock_file(tmp_path / "b", fileio.HOST, os.getppid(), 0)
  with output_lock.writing_output(tmp_path / "a"):
    assert not os.path.exists(dead)
  with pytest.raises(output_lock.OutputLockedError, match=f"pid {os.getppid()} "):
    with output_lock.writing_output(tmp_path / "b"):
      pass
  assert os.path.exists(live)


def test_a_pid_now_used_by_another_process_or_boot_is_stale(tmp_path):
  """A killed run's pid taken by a new process (a restarted container), or a
  lock from before a reboot: taken over, not named as a live writer."""
  for n, field in enumerate(({"process_start": "1"}, {"boot_id": "another-boot"})):
    out = tmp_path / f"out{n}"
    lock_file = _write_lock_file(out, fileio.HOST, os.getppid(), time.time())
    fileio.write_json(lock_file, dict(fileio.read_json(lock_file), **field))
    with output_lock.writing_output(out):
      assert not os.path.exists(lock_file)


def test_the_lock_nests_and_leaves_nothing_behind(tmp_path):
  out = tmp_path / "new" / "deeper" / "out"
  with output_lock.writing_output(out):
    with output_lock.writing_output(str(out) + "/"):
      assert len(_lock_files(out)) == 1
    assert len(_lock_files(out)) == 1
  assert not (tmp_path / "new").exists()  # The folders it made are gone too.


def test_runs_starting_together_retry_and_never_both_hold(tmp_path, monkeypatch):
  out = tmp_path / "o"
  rival = _write_lock_file(out, fileio.HOST, os.getppid(), time.time())
  pauses = []

  def rival_withdraws():
    pauses.append("withdrawn")
    os.remove(rival)
  monkeypatch.setattr(output_lock, "_collision_pause", rival_withdraws)
  with output_lock.writing_output(out):
    assert pauses == ["withdrawn"] and len(_lock_files(out)) == 1
  rival = _write_lock_file(out, fileio.HOST, os.getppid(), time.time())
  monkeypatch.setattr(output_lock, "_collision_pause",
                      lambda: pauses.append("stays"))
  with pytest.raises(output_lock.OutputLockedError):
    with output_lock.writing_output(out):
      pass
  assert pauses[1:] == ["stays"] and _lock_files(out) == [os.path.basename(rival)]


def test_holders_refresh_their_lock_files(tmp_path, capsys):
  out = tmp_path / "model_dir"
  with output_lock.writing_output(out):
    (name,) = _lock_files(out)
    before = json.loads((tmp_path / name).read_text())["refreshed"]
    time.sleep(0.01)
    output_lock.refresh_held_locks()
    assert json.loads((tmp_path / name).read_text())["refreshed"] > before
    os.remove(tmp_path / name)
    output_lock.refresh_held_locks()
    assert "was removed by another process" in capsys.readouterr().err
    assert _lock_files(out) == []


def test_a_training_directory_is_written_by_one_process(tmp_path):
  """The trainers' API: `output_lock.writing_output(model_dir)` on the chief."""
  model_dir = tmp_path / "pretrain"
  with testlib.held_by_another_process(model_dir) as (pid, _):
    with pytest.raises(output_lock.OutputLockedError, match=f"pid {pid} "):
      with output_lock.writing_output(model_dir):
        pass
  with output_lock.writing_output(model_dir):
    fileio.write_text(fileio.join(model_dir, "params.yaml"), "x: 1\n")
  assert _lock_files(model_dir) == [] and os.listdir(model_dir) == ["params.yaml"]


@pytest.mark.parametrize("tf_config, chief", [
    (None, True),
    ({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 0}}, True),
    ({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}, False),
    ({"cluster": {"chief": ["c:0"], "worker": ["a:1"]}, "task": {"type": "worker", "index": 0}}, False),
    ({"cluster": {"chief": ["c:0"], "worker": ["a:1"]}, "task": {"type": "chief", "index": 0}}, True),
])
def test_only_the_chief_of_a_multi_worker_run_writes(tf_config, chief, monkeypatch):
  monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config) if tf_config else "")
  assert strategies.is_chief_process() is chief


def test_a_shared_output_is_locked_by_the_chief_alone(tmp_path, monkeypatch):
  """`strategies.writing_shared_output`: the chief meets another run's lock; a
  non-chief worker (TF_CONFIG, or told) takes no lock and is not refused."""
  out = tmp_path / "model_dir"
  with testlib.held_by_another_process(out) as (pid, _):
    with pytest.raises(output_lock.OutputLockedError, match=f"pid {pid} "):
      with strategies.writing_shared_output(out, chief=True):
        pass
    with strategies.writing_shared_output(out, chief=False):
      pass
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"worker": ["a:1", "b:2"]},
        "task": {"type": "worker", "index": 1}}))
    with strategies.writing_shared_output(out):
      pass
    monkeypatch.setenv("TF_CONFIG", "")
    with pytest.raises(output_lock.OutputLockedError):
      with strategies.writing_shared_output(out):
        pass


def test_cleanup_keeps_the_temporaries_of_live_writers(tmp_path):
  out = str(tmp_path / "out")
  finished = subprocess.Popen([sys.executable, "-c", "pass"])
  finished.wait()
  dead = tmp_path / f".out.tmp-{finished.pid}@{fileio.HOST}-0000"
  old_format = tmp_path / ".out.tmp-999-dead"
  other_host = tmp_path / ".out.tmp-77@tpu-vm-3-0000"
  other_host_live = tmp_path / ".out.tmp-78@tpu-vm-4-0000"
  for path in (dead, old_format, other_host, other_host_live):
    path.mkdir()
  _write_lock_file(out, "tpu-vm-4", 78, time.time())
  with testlib.held_by_another_process(tmp_path / "elsewhere") as (pid, _):
    live = tmp_path / f".out.tmp-{pid}@{fileio.HOST}-0000"
    live.mkdir()
    removed = outputs.remove_stale_temporaries(out)
    assert sorted(os.path.basename(p) for p in removed) == sorted(
        p.name for p in (dead, old_format, other_host))
    assert live.exists() and other_host_live.exists()
  assert outputs.remove_stale_temporaries(out) == [str(live)]


def test_every_command_refuses_an_output_another_run_writes(tmp_path, capsys):
  """Each command's entry point takes its output's lock before any work."""
  from rembert_tf.ablation import suite  # pylint: disable=g-import-not-at-top
  from rembert_tf.cli import run_ablation  # pylint: disable=g-import-not-at-top
  from rembert_tf.conversion import converter  # pylint: disable=g-import-not-at-top
  from rembert_tf.data import pretraining_record_creation  # pylint: disable=g-import-not-at-top
  from rembert_tf.data import sentencepiece_training  # pylint: disable=g-import-not-at-top
  from rembert_tf.demo import corpus  # pylint: disable=g-import-not-at-top
  from rembert_tf.evaluation import layer_similarity  # pylint: disable=g-import-not-at-top
  from rembert_tf.export import encoder_export  # pylint: disable=g-import-not-at-top
  from rembert_tf.export import preprocessor_export  # pylint: disable=g-import-not-at-top
  missing = str(tmp_path / "missing")
  commands = {
      "converted": lambda out: converter.convert_checkpoint(
          "hf", "rembert_tf", missing, out),
      "encoder": lambda out: encoder_export.export_encoder(missing, out),
      "preprocessor": lambda out: preprocessor_export.export_preprocessor(
          missing, out),
      "records": lambda out: pretraining_record_creation.create_pretraining_data(
          [missing + "/{lang}/*.txt"], out, missing),
      "fixture_records": lambda out: pretraining_record_creation.write_pretraining_records(
          out, [[5, 6]], seq_length=8, max_predictions_per_seq=1, vocab_size=10),
      "spm": lambda out: sentencepiece_training.train_sentencepiece(
          [missing + "/{lang}/*.txt"], out, 100),
      "similarity": lambda out: layer_similarity.analyze_checkpoints(
          missing, None, ["a sentence"], output_dir=out),
      "corpus": lambda out: corpus.generate_corpus(out),
      "ablation": lambda out: run_ablation.run_suite(
          suite.SuiteOptions(output_dir=out)),
  }
  outputs = {name: str(tmp_path / name) for name in commands}
  with testlib.held_by_another_process(*outputs.values()) as (pid, _):
    for name, command in commands.items():
      with pytest.raises((output_lock.OutputLockedError, SystemExit)) as refused:
        command(outputs[name])
      message = (capsys.readouterr().err if refused.type is SystemExit
                 else str(refused.value))
      assert f"{outputs[name]} is being written by another run (pid {pid} " \
             "on this host" in message, name
  # Nothing but the holder's temporaries: the refused runs wrote nothing.
  leftovers = sorted(n.rsplit("-", 1)[0] for n in os.listdir(tmp_path))
  assert leftovers == sorted(f".{name}.tmp-{pid}@{fileio.HOST}"
                             for name in commands)


def test_an_unwritable_parent_names_the_output_not_the_lock_file(
    tmp_path, monkeypatch):
  """A read-only parent (export, fine-tuning): the line names the output and
  the reason; the lock's temporary file is not the user's business."""
  import errno  # pylint: disable=g-import-not-at-top
  from rembert_tf.common import errors  # pylint: disable=g-import-not-at-top

  def read_only(path, text):
    del text
    raise OSError(errno.EROFS, "Read-only file system", f"{path}-tmp-1234")

  monkeypatch.setattr(fileio, "write_text", read_only)
  output = tmp_path / "ro" / "exp"
  (tmp_path / "ro").mkdir()
  for take in (lambda: output_lock.writing_output(output),
               lambda: outputs.atomic_directory(output),
               lambda: strategies.writing_shared_output(output)):
    with pytest.raises(errors.UsageError) as refused:
      with take():
        pass
    line = errors.one_line(refused.value)
    assert line == (f"{output}: cannot write this output (Read-only file "
                    f"system in {tmp_path / 'ro'}); choose an output on a file "
                    "system and folder you can write to."), line
    assert "lock" not in line and "tmp" not in line.replace(str(tmp_path), "")
  assert sorted(p.name for p in tmp_path.iterdir()) == ["ro"]
  assert not list((tmp_path / "ro").iterdir())
