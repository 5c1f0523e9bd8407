"""The orbit private members runtime/orbit_loop.py builds on, checked against
the installed release.

`StopCheckingTrainer` drives orbit's loop function and iterator itself and
`AfterLoopController` hooks orbit's after-loop save and reads its checkpoint
options; none of these is public API. These tests fail on the orbit / Model
Garden release where one of them is renamed, changes its signature or its
role, so an upgrade is reviewed here, not discovered in a preempted TPU run.
"""
import importlib.metadata
import inspect

import orbit
import pytest
import tensorflow as tf

from rembert_tf.runtime import orbit_loop

# The releases these members were read against (the stack pins Model Garden,
# which vendors orbit, together with TensorFlow).
CHECKED_RELEASES = {"tf-models-official": "2.20", "tensorflow": "2.20"}


@pytest.mark.parametrize("package,release", sorted(CHECKED_RELEASES.items()))
def test_the_installed_release_is_the_one_checked(package, release):
  installed = importlib.metadata.version(package)
  assert installed.split(".")[:2] == release.split("."), (
      f"{package} {installed}: orbit_loop's use of orbit internals was checked "
      f"against {release}; re-read StopCheckingTrainer and AfterLoopController "
      "against this release, then update CHECKED_RELEASES.")


def test_standard_trainer_keeps_its_loop_function_and_iterator():
  source = inspect.getsource(orbit.StandardTrainer)
  # Created lazily on the first train() call, reused afterwards.
  assert "self._train_loop_fn = None" in source
  assert "self._train_iter = None" in source
  assert "self._train_loop_fn(self._train_iter, num_steps)" in source
  assert "def create_train_loop_fn(self)" in source


def test_controller_saves_after_each_loop_through_its_hook():
  hook = orbit.Controller._maybe_save_checkpoint  # pylint: disable=protected-access
  assert list(inspect.signature(hook).parameters) == ["self", "check_interval"]
  train_source = inspect.getsource(orbit.Controller.train)
  assert "self._maybe_save_checkpoint()" in train_source            # each loop
  assert "self._maybe_save_checkpoint(check_interval=False)" in train_source
  init_source = inspect.getsource(orbit.Controller.__init__)
  assert "self._checkpoint_options = tf.train.CheckpointOptions(" in init_source
  options = tf.train.CheckpointOptions(enable_async=True)
  assert options.experimental_enable_async_checkpoint is True


def test_after_loop_controller_overrides_only_the_checked_hook():
  own = {name for name in vars(orbit_loop.AfterLoopController)
         if name.startswith("_") and not name.startswith("__")}
  assert own == {"_maybe_save_checkpoint"}
  assert hasattr(orbit.Controller, "_maybe_save_checkpoint")
