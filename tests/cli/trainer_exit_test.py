"""How the trainers end (`trainer_exit.run`): the log is written, then the
process ends without the interpreter's teardown."""
import os
import subprocess
import sys
import textwrap

import pytest

# A command run as the trainers run theirs: it keeps the log of further exit
# codes (`keep_log`) and labels its log. The log moves file descriptor 2 and
# sys.stderr: a process of its own.
_EXIT_NOW_COMMAND = textwrap.dedent("""
    import os, sys, threading
    from absl import flags, logging
    from rembert_tf.cli import trainer_exit
    from rembert_tf.common import command
    flags.DEFINE_string("output_dir", None, "the run's directory")
    flags.DEFINE_string("end", "0", "the exit code, or `bug`")
    class LogsWhenFinalised:
      def __del__(self):
        logging.warning("finalised during the teardown")
    kept_alive = LogsWhenFinalised()
    def main(argv):
      command.set_log_label("worker1")
      thread = threading.Thread(target=lambda: 1 / 0, name="watcher")
      thread.start()
      thread.join()
      print("result on stdout")
      if flags.FLAGS.end == "bug":
        raise KeyError("a bug")
      sys.exit(int(flags.FLAGS.end))
    trainer_exit.run(
        main, "a test command", "rembert-x", output_dir_flag="output_dir",
        keep_log=lambda code, output_dir: code == 0 or code == 1 and
        os.path.exists(os.path.join(output_dir, "started")))
    print("never reached")
""")


@pytest.mark.parametrize("exit_code, started, kept", [
    ("0", False, True), ("1", True, True), ("1", False, False),
    ("bug", False, False)])
def test_exit_now_keeps_the_log_and_ends_without_teardown(
    tmp_path, exit_code, started, kept):
  if started:
    (tmp_path / "started").write_text("")
  done = subprocess.run(
      [sys.executable, "-c", _EXIT_NOW_COMMAND, f"--output_dir={tmp_path}",
       f"--end={exit_code}"],
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


def test_help_exits_as_before_main_runs():
  done = subprocess.run(
      [sys.executable, "-c", _EXIT_NOW_COMMAND, "--help"],
      capture_output=True, text=True, check=False, timeout=60,
      env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
  assert done.returncode == 0, done.stderr
  assert "a test command" in done.stdout and "never reached" not in done.stdout
