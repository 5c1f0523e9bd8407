"""How `rembert-train` and `rembert-finetune` end: at once, once their log is written.

Builds on `rembert_tf.common.command` (`run` and its log file). With a
tf.distribute strategy and its datasets alive, the interpreter's teardown
takes seconds (a minute and more on a busy CPU) and logs into a closed file;
every checkpoint and result is complete by the time the log is, so the
process ends without it (`os._exit`). A bug's traceback goes to the log and
the console first.
"""
import contextlib
import functools
import os
import sys
import traceback
from typing import Callable

from absl import logging

from rembert_tf.common import command


def run(main: Callable, doc: str, program: str, **kwargs) -> None:
  """`command.run(main, doc, program, **kwargs)`; once `main` has run and its
  log is finished, the process ends with the exit code, without teardown."""
  ran = []

  @functools.wraps(main)
  def main_logging_bugs(argv):
    ran.append(True)
    try:
      return main(argv)
    except SystemExit:
      raise
    except BaseException:  # pylint: disable=broad-except
      logging.exception("%s failed", program)
      traceback.print_exc()
      return 1

  try:
    command.run(main_logging_bugs, doc, program, **kwargs)
  except SystemExit as e:
    if not ran:  # --help or a refused flag: nothing to tear down
      raise
    _exit_now(e.code if isinstance(e.code, int) else int(e.code is not None))


def _exit_now(code: int) -> None:
  for stream in (sys.stdout, sys.stderr):
    with contextlib.suppress(OSError, ValueError):
      stream.flush()
  logging.flush()
  os._exit(code)  # pylint: disable=protected-access
