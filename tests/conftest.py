"""Test-session setup: TensorFlow with 2 logical CPU devices, imported without JAX.

Logical devices can only be configured before TensorFlow initialises its
runtime, so this happens when pytest is configured, before any test module
builds a tensor, in each process that runs tests (pytest-xdist's controller
runs none and never imports TensorFlow). Tests that need two replicas take
the session-wide `two_cpu_strategy` fixture.

site_hooks/sitecustomize.py keeps TensorFlow's import from importing JAX
(for TFLite alone): installed here, and through PYTHONPATH in every process
the tests start.
"""
import importlib.util
import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

SITE_HOOKS = pathlib.Path(__file__).with_name("site_hooks")
_spec = importlib.util.spec_from_file_location(
    "tests_site_hooks", SITE_HOOKS / "sitecustomize.py")
_spec.loader.exec_module(importlib.util.module_from_spec(_spec))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(SITE_HOOKS)] + [p for p in [os.environ.get("PYTHONPATH")] if p])

import pytest  # noqa: E402

TWO_CPUS = ["/cpu:0", "/cpu:1"]


def _two_logical_cpus():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  cpus = tf.config.list_physical_devices("CPU")
  tf.config.set_logical_device_configuration(
      cpus[0], [tf.config.LogicalDeviceConfiguration(),
                tf.config.LogicalDeviceConfiguration()])


@pytest.fixture(scope="session")
def two_cpu_strategy():
  """One MirroredStrategy for the whole session.

  Every strategy instance numbers its collective ops from the same keys, and
  the runtime caches a collective's shape by key: two instances in one
  process that all-reduce different shapes abort with "Shape mismatch in the
  collective instance". Tests therefore share this one (so should a user's
  process: one strategy per program).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.distribute.MirroredStrategy(TWO_CPUS)


# --- Order ---------------------------------------------------------------------
# The suite runs in pytest-xdist processes that each take whole files
# (`--dist loadfile`), in the order collected: a file of minutes handed out
# last keeps one process busy long after the others have finished. These go
# first, longest first; every other file keeps its place after them.
LONGEST_FIRST = (
    "tests/keras3/keras_backends_test.py",
    "tests/demo/demo_test.py",
    "tests/keras3/keras_hub_contribution_test.py",
    "tests/keras3/pretraining_resume_test.py",
    "tests/keras3/masked_lm_pretraining_test.py",
    "tests/finetuning/output_identity_test.py",
    "tests/docs/snippets_test.py",
    "tests/retrieval/retrieve_command_test.py",
    "tests/pretraining/pretrain_multi_worker_test.py",
    "tests/docs/readme_quickstart_test.py",
    "tests/retrieval/retrieve_tfds_test.py",
    "tests/pretraining/pretrain_preemption_test.py",
    "tests/pretraining/pretrain_live_readers_test.py",
    "tests/pretraining/pretrain_continuous_eval_test.py",
)


def pytest_configure(config):
  # pytest-xdist hands out whole files largest first (by number of tests)
  # unless told to keep the collected order, which puts these last.
  if hasattr(config.option, "loadscopereorder"):
    config.option.loadscopereorder = False
  controller = getattr(config.option, "numprocesses", None) and not hasattr(
      config, "workerinput")
  if not controller:
    _two_logical_cpus()


def pytest_collection_modifyitems(config, items):
  missing = [p for p in LONGEST_FIRST if not (config.rootpath / p).is_file()]
  if missing:  # a renamed file would silently lose its place
    raise pytest.UsageError(f"tests/conftest.py LONGEST_FIRST: no {missing}")
  rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
  items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


# --- Session end ---------------------------------------------------------------
# TensorFlow can deadlock while destroying a distributed (MultiDeviceIterator)
# input iterator during the final garbage collection: its destructor waits for
# a prefetch thread that never finishes. pytest runs that collection in its
# own unconfigure step, after every result and the summary are printed. The
# session therefore ends here, with pytest's exit status, before it.
_SESSION_EXIT_STATUS = []


def pytest_sessionfinish(session, exitstatus):
  del session
  _SESSION_EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config):
  del config
  if _SESSION_EXIT_STATUS:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_SESSION_EXIT_STATUS[-1])  # pylint: disable=protected-access
