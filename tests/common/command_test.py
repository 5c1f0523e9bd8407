"""How a command runs: the log file (the noise goes there, into the output only on success),
a quiet start-up, program names."""
import os
import subprocess
import sys
import textwrap

import pytest

from rembert_tf.common import command


# The log file moves file descriptor 2 and sys.stderr: a process of its own.
# Flags are not parsed, as in a command that parses its arguments itself.
_COMMAND = textwrap.dedent("""
    import os, sys
    from absl import flags, logging
    from rembert_tf.common import command
    out = command.CommandLog(
        "rembert-x", sys.argv[1], verbose=False,
        artefact=len(sys.argv) > 3).start()
    if len(sys.argv) > 4:
      out.flags_parsed(sys.argv[1], log_dir=sys.argv[4])
    def main(argv):
      os.makedirs(sys.argv[1], exist_ok=True)
      os.write(2, b"E cuda_platform.cc:51] failed call to cuInit\\n")
      logging.info("absl info line")
      logging.error("absl error line")
      print("result on stdout")
      print("message on stderr", file=sys.stderr)
      return int(sys.argv[2])
    try:
      command.run_logged(main, [], out)
    finally:
      print("LOG", out.log_path)
""")


def _run_command(output_dir, exit_code, *artefact_and_log_dir):
  return subprocess.run([sys.executable, "-c", _COMMAND, str(output_dir),
                         str(exit_code), *map(str, artefact_and_log_dir)],
                        capture_output=True, text=True,
                        check=False, timeout=60,
                        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))


def test_command_log_file_holds_the_noise_and_lands_in_the_output_dir(tmp_path):
  done = _run_command(tmp_path, 0)
  assert done.returncode == 0, done.stderr
  assert "result on stdout" in done.stdout
  assert "message on stderr" in done.stderr
  assert "absl error line" in done.stderr  # Errors still reach the console.
  assert "cuInit" not in done.stderr and "absl info line" not in done.stderr
  assert "full log: " in done.stderr
  (log,) = (tmp_path / "logs").glob("rembert-x-*.log")
  text = log.read_text()
  assert "failed call to cuInit" in text and "absl info line" in text
  assert "exit code 0" in text
  temporary = done.stdout.split("LOG ")[1].split()[0]
  assert not os.path.exists(temporary)


def test_failed_command_writes_nothing_into_the_output_dir(tmp_path):
  done = _run_command(tmp_path / "out", 1)
  assert "message on stderr" in done.stderr
  assert os.listdir(tmp_path / "out") == []
  temporary = done.stdout.split("LOG ")[1].split()[0]
  assert "failed call to cuInit" in open(temporary).read()
  os.remove(temporary)


def test_an_artefact_keeps_its_log_beside_it_or_in_the_log_dir(tmp_path):
  done = _run_command(tmp_path / "export", 0, "artefact")
  assert done.returncode == 0, done.stderr
  assert os.listdir(tmp_path / "export") == []  # the artefact alone
  (log,) = (tmp_path / "export.logs").glob("rembert-x-*.log")
  assert f"full log: {log}" in done.stderr
  # --log_dir overrides the rule, and keeps the log of a failed run too.
  _run_command(tmp_path / "other", 1, "artefact", tmp_path / "mine")
  (log,) = (tmp_path / "mine").glob("rembert-x-*.log")
  assert "(exit code 1)" in log.read_text()
  assert sorted(os.listdir(tmp_path)) == ["export", "export.logs", "mine",
                                          "other"]


@pytest.mark.parametrize("root", ["ram://command_test", "runs", "gs://b"])
def test_log_dir_for_is_one_rule_on_every_filesystem(root):
  assert command.log_dir_for(f"{root}/export/", artefact=True) == (
      f"{root}/export.logs")
  assert command.log_dir_for(f"{root}/run", artefact=False) == (
      f"{root}/run/logs")
  assert command.log_dir_for(f"{root}/run", False, "elsewhere") == (
      "elsewhere")


def test_an_artefact_on_ram_keeps_its_log_beside_it(tmp_path):
  from rembert_tf.common import fileio  # pylint: disable=g-import-not-at-top
  output_dir = "ram://command_test/presets/mine"
  fileio.makedirs(output_dir)
  output = command.CommandLog("rembert-x", output_dir, artefact=True)
  output.log_path = str(tmp_path / "running.log")
  output.file = open(output.log_path, "a", encoding="utf-8")
  target = output.finish(0)
  output.file.close()
  assert target == f"{output_dir}.logs/{output.log_name}"
  assert "(exit code 0)" in fileio.read_text(target)
  # (ram:// lists by name prefix: `mine` shows `mine.logs`' tail, `.logs`.)
  assert sorted(fileio.listdir("ram://command_test/presets")) == [
      "mine", "mine.logs"]
  assert not (tmp_path / "running.log").exists()


def test_logs_of_failed_runs_are_removed_after_a_week(tmp_path, monkeypatch):
  monkeypatch.setattr(command, "LOG_TMP_DIR", str(tmp_path))
  old, recent, other = (tmp_path / "rembert-x-1.log", tmp_path / "rembert-x-2.log",
                        tmp_path / "notes.txt")
  for path in (old, recent, other):
    path.write_text("log")
  eight_days_ago = os.path.getmtime(recent) - 8 * 86400
  os.utime(old, (eight_days_ago, eight_days_ago))
  os.utime(other, (eight_days_ago, eight_days_ago))
  command.remove_old_logs()
  assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "rembert-x-2.log"]


# A command that ends without the interpreter's teardown (`exit_now`),
# keeps the log of further exit codes (`keep_log`) and labels its log.
_EXIT_NOW_COMMAND = textwrap.dedent("""
    import os, sys, threading
    from absl import logging
    from rembert_tf.common import command
    out = command.CommandLog(
        "rembert-x", sys.argv[1], verbose=False,
        keep_log=lambda code, output_dir: code == 0 or code == 1 and
        os.path.exists(os.path.join(output_dir, "started"))).start()
    command.set_log_label("worker1")
    class LogsWhenFinalised:
      def __del__(self):
        logging.warning("finalised during the teardown")
    kept_alive = LogsWhenFinalised()
    def main(argv):
      thread = threading.Thread(target=lambda: 1 / 0, name="watcher")
      thread.start()
      thread.join()
      print("result on stdout")
      if sys.argv[2] == "bug":
        raise KeyError("a bug")
      sys.exit(int(sys.argv[2]))
    command.run_logged(main, [], out, exit_now=True)
    print("never reached")
""")


@pytest.mark.parametrize("exit_code, started, kept", [
    ("0", False, True), ("1", True, True), ("1", False, False),
    ("bug", False, False)])
def test_exit_now_keeps_the_log_and_ends_without_teardown(
    tmp_path, exit_code, started, kept):
  tmp_path.mkdir(exist_ok=True)
  if started:
    (tmp_path / "started").write_text("")
  done = subprocess.run(
      [sys.executable, "-c", _EXIT_NOW_COMMAND, str(tmp_path), exit_code],
      capture_output=True, text=True, check=False, timeout=60,
      env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
  assert done.returncode == (1 if exit_code == "bug" else int(exit_code))
  assert "result on stdout" in done.stdout and "never reached" not in done.stdout
  # No teardown: nothing logs into a closed file; the thread's traceback
  # went to the log, not the console.
  assert "Logging error" not in done.stderr
  assert "ZeroDivisionError" not in done.stderr
  assert ("KeyError" in done.stderr) == (exit_code == "bug")
  logs = list((tmp_path / "logs").glob("rembert-x-*-worker1.log"))
  assert len(logs) == int(kept), done.stderr
  if kept:
    text = logs[0].read_text()
    assert "ZeroDivisionError" in text and "watcher" in text
    assert text.rstrip().endswith(f"(exit code {int(exit_code)})")


def test_quiet_tensorflow_import_respects_verbose_and_the_environment(monkeypatch):
  monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
  command.quiet_tensorflow_import(["rembert-train", "--verbose"])
  assert "TF_CPP_MIN_LOG_LEVEL" not in os.environ
  command.quiet_tensorflow_import(["rembert-train"])
  assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "2"
  monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
  command.quiet_tensorflow_import(["rembert-train"])
  assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"
