"""A worker's error ends the command at once; a pool never respawns a failing
worker: a script without a `__main__` guard calling `create_pretraining_data`
with two workers (each spawned worker re-runs it), a worker raising a user
error, a worker that dies."""
import os
import subprocess
import sys
import time

import pytest
import testlib

from rembert_tf.common import errors
from rembert_tf.common import outputs
from rembert_tf.common import worker_pool

# A user's script as docs/data.md warns against: no `__main__` guard.
UNGUARDED_SCRIPT = """
from rembert_tf.data import pretraining_record_creation
pretraining_record_creation.create_pretraining_data(
    [{corpus!r}], "records", {model!r},
    seq_length=32, max_predictions_per_seq=5, num_workers=2)
print("records written")
"""
# Subprocess bound: a respawning pool would run until it is killed.
TIMEOUT_S = 120


def _run(argv, cwd):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
             PYTHONPATH=os.pathsep.join([str(testlib.REPO),
                                         os.environ.get("PYTHONPATH", "")]))
  start = time.time()
  done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                        timeout=TIMEOUT_S, check=False)
  return done, time.time() - start


def _corpus(tmp_path):
  """Two files of English and one of Spanish from the shared demo corpus."""
  for lang, count in (("en", 2), ("es", 1)):
    (tmp_path / "corpus" / lang).mkdir(parents=True)
    for k, source in enumerate(sorted((testlib.demo_corpus_dir() / lang).glob("*.txt"))[:count]):
      (tmp_path / "corpus" / lang / f"part-{k}.txt").write_bytes(source.read_bytes()[:20000])
  return str(tmp_path / "corpus" / "{lang}" / "*")


def test_an_unguarded_script_with_workers_fails_at_once_saying_to_add_the_guard(tmp_path):
  script = tmp_path / "make_records.py"
  script.write_text(UNGUARDED_SCRIPT.format(
      corpus=_corpus(tmp_path), model=str(testlib.sentencepiece_model())))
  done, seconds = _run([sys.executable, str(script)], tmp_path)
  assert done.returncode == 1, (done.stdout[-2000:], done.stderr[-3000:])
  assert "records written" not in done.stdout
  last = done.stderr.strip().splitlines()[-1]
  assert last.startswith("rembert_tf.common.worker_pool.WorkerError: "), done.stderr[-3000:]
  assert 'if __name__ == "__main__":' in last and "num_workers=1" in last, last
  # The workers print nothing of their own (no traceback per worker).
  assert done.stderr.count("Traceback") == 1, done.stderr[-3000:]
  assert not (tmp_path / "records").exists()
  assert seconds < TIMEOUT_S


def _even_only(n):
  """Runs in a worker: a user error for odd numbers, a dead worker for 9."""
  if n == 9:
    os._exit(3)  # pylint: disable=protected-access
  if n % 2:
    raise errors.InputError(f"item {n}: odd; pass even numbers.")
  return n


def test_a_worker_error_ends_the_pool_with_that_error():
  start = time.time()
  with pytest.raises(errors.InputError, match=r"^item 1: odd; pass even numbers\.$"):
    with worker_pool.pool(2, "even_only") as pool:
      list(pool.map(_even_only, [0, 1, 2, 4]))
  with worker_pool.pool(2, "even_only") as pool:
    assert sorted(pool.map(_even_only, [4, 0, 2])) == [0, 2, 4]
  assert time.time() - start < TIMEOUT_S


def test_a_dead_worker_ends_the_pool_with_one_error_not_a_new_worker():
  with pytest.raises(worker_pool.WorkerError,
                     match=r"^even_only: a worker process ended without a result"):
    with worker_pool.pool(2, "even_only") as pool:
      list(pool.map(_even_only, [0, 9, 2]))
  assert outputs.WORKER_ERRORS_ENV not in os.environ
