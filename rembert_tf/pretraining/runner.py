"""Runs a pre-training experiment: the library behind `python -m rembert_tf.train`.

Builds on Model Garden's `official.core.train_lib` (`OrbitExperimentRunner`:
orbit Controller + `base_trainer.Trainer`) and
`official.common.distribute_utils` (strategies), adding what a resumable,
preemptible RemBERT job on TPU pods needs around them:

* every path through `rembert_tf.common.fileio`: records and `model_dir` on
  any TensorFlow filesystem (gs://, a local disk);
* checks before the first step (one line each, nothing written): a writable
  `model_dir`; data for the mode; records that match the model and whose
  listed shards all exist; a `model_dir` checkpoint of this model; a resume
  on records of the same SentencePiece model (sha256);
* a checkpoint every `trainer.checkpoint_interval` steps keeping
  `trainer.max_to_keep` (Model Garden's CheckpointManager), automatic resume
  (step, weights, optimizer slots), a failed save that leaves no
  `ckpt-N_temp`, and stale ones removed at start;
* a stop check between steps (`trainer.stop_check_steps`), not only at the
  end of a loop of `steps_per_loop`: SIGTERM saves at the step reached
  (single host); several workers consult TF's `PreemptionCheckpointHandler`
  at the same points;
* after saves the fine-tuning artefacts next to the full checkpoint, per
  `rembert_tf.modeling.checkpoint_layout`: `model_config.yaml`, `encoder/ckpt-N`
  (every `trainer.encoder_export_every_n_checkpoints`-th save and the last),
  and `sentencepiece.model` when the records' metadata names one; under
  MultiWorkerMirroredStrategy every worker builds the same objects and
  non-chief workers write into temporary directories;
* TensorBoard summaries (`model_dir/train`, `model_dir/validation`: loss,
  masked_lm_accuracy, lm_example_loss, learning_rate, examples_per_second,
  gradient_norm, steps_per_second), a console line per loop, and a stop with
  a clear message on a NaN / inf loss, before that loop's weights are saved;
  a corrupted record shard is named in one line.

Example (what `rembert_tf/demo/runner.py` does in-process):
```python
from rembert_tf import pretraining
config = pretraining.load_experiment_config(
    ["configs/experiments/pretrain_tiny_demo.yaml"],
    "task.train_data.input_path=/tmp/run/records/train/*.tfrecord,"
    "task.validation_data.input_path=/tmp/run/records/eval/*.tfrecord")
metrics = pretraining.run(config, "/tmp/run/pretrain", mode="train_and_eval")
metrics["eval_masked_lm_accuracy"], metrics["global_step"]
```
"""
import os
import signal
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Union

from absl import logging
import numpy as np
import orbit
import tensorflow as tf
import tf_keras
from official.common import distribute_utils
from official.core import base_trainer
from official.core import config_definitions as cfg
from official.core import task_factory
from official.core import train_lib
from official.core import train_utils
from official.modeling import performance

from rembert_tf.common import console
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.data import pretraining_input_pipeline
from rembert_tf.modeling import checkpoint_layout
from rembert_tf.modeling import checkpoint_restore
from rembert_tf.modeling import rembert_config
from rembert_tf.pretraining import experiments
from rembert_tf.pretraining import masked_lm_task

MODES = ("train", "eval", "train_and_eval")
STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")
PRECISIONS = {"float32": "float32", "mixed_bfloat16": "bfloat16",
              "bfloat16": "bfloat16"}
PARAMS_FILE = "params.yaml"
PREEMPTED_EXIT_CODE = errors.EXIT_PREEMPTED  # TF's PreemptionCheckpointHandler's too.
NON_FINITE_LOSS_EXIT_CODE = errors.EXIT_NON_FINITE_LOSS
# TF writes a checkpoint's shards under `PREFIX_temp/` and renames them when
# complete; a failed or killed save leaves that directory behind.
CHECKPOINT_TEMP_GLOB = "ckpt-*_temp"
# A log line (not the console) with the step reached, at most this often,
# also inside a long loop of steps_per_loop steps.
HEARTBEAT_SECONDS = 60


class PretrainingError(errors.RemBertError, ValueError):
  """A pre-training run cannot start or go on; the message names the cause and fix."""


class CheckpointMismatchError(PretrainingError):
  """model_dir holds a checkpoint of a different model."""


class TokenizerMismatchError(PretrainingError):
  """The records were made with another SentencePiece model than model_dir's."""


class CorruptRecordsError(PretrainingError):
  """A record shard is corrupted or truncated."""


class NonFiniteLossError(errors.RemBertError, RuntimeError):
  """The training loss became NaN or inf; the last good checkpoint is kept."""


class TrainingPreempted(errors.RemBertError, RuntimeError):
  """SIGTERM arrived; a checkpoint was saved and the run stopped."""

  def __init__(self, message, step, checkpoint_path):
    super().__init__(message)
    self.step = step
    self.checkpoint_path = checkpoint_path


# ---------------------------------------------------------------------------
# Distribution strategies.
def _tpu_hints() -> List[str]:
  hints = [p for p in ("/dev/accel0", "/dev/vfio/0") if fileio.exists(p)]
  hints += [f"${k}" for k in ("TPU_NAME", "COLAB_TPU_ADDR",
                             "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS")
            if os.environ.get(k)]
  return hints


def make_strategy(name: str, tpu: Optional[str] = None) -> tf.distribute.Strategy:
  """A tf.distribute strategy by flag name (see STRATEGIES).

  `multi_worker_mirrored` and `tpu` are built by Model Garden's
  `distribute_utils.get_distribution_strategy`, which for TPUs also builds the
  device assignment newer TPU generations need. `tpu` is a TPU name or
  grpc:// address; without it the TPU attached to this VM is used (a TPU VM
  needs no --tpu). Fails at once when no TPU is in sight.
  """
  if name == "one_device":
    gpus = tf.config.list_logical_devices("GPU")
    return tf.distribute.OneDeviceStrategy("/gpu:0" if gpus else "/cpu:0")
  if name == "mirrored":
    return tf.distribute.MirroredStrategy()
  if name == "multi_worker_mirrored":
    return distribute_utils.get_distribution_strategy("multi_worker_mirrored")
  if name == "tpu":
    return _make_tpu_strategy(tpu)
  raise PretrainingError(f"--strategy {name!r}: expected one of "
                         f"{', '.join(STRATEGIES)}.")


def _make_tpu_strategy(tpu: Optional[str]) -> tf.distribute.Strategy:
  if not tpu and not _tpu_hints():
    raise PretrainingError(
        "--strategy tpu: no TPU found on this machine (no /dev/accel*, no "
        "$TPU_NAME) and no --tpu given. On a TPU VM install the TPU build of "
        "TensorFlow (README 'Pre-training on Cloud TPU'); pass --tpu <name or "
        "grpc://host:8470> for a remote TPU; or run on CPU/GPU with "
        "--strategy one_device or --strategy mirrored.")
  address = "" if tpu in (None, "", "local") else tpu
  try:
    return distribute_utils.get_distribution_strategy(
        "tpu", tpu_address=address)
  except (ValueError, RuntimeError, tf.errors.OpError) as e:
    raise PretrainingError(
        f"--strategy tpu --tpu {tpu or '(this VM)'}: cannot connect to the "
        f"TPU ({errors.one_line(e)}). Check the TPU name / address and that "
        "this VM can reach it.") from None


def _is_multi_worker(strategy: tf.distribute.Strategy) -> bool:
  """MultiWorkerMirroredStrategy over several processes (TPU: one controller)."""
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return False
  resolver = strategy.cluster_resolver
  if resolver is None:
    return False
  spec = resolver.cluster_spec().as_dict()
  return sum(len(spec.get(job, [])) for job in ("chief", "worker")) > 1


# ---------------------------------------------------------------------------
# Checks before the first step.
def check_model_dir_writable(model_dir: str) -> None:
  try:
    fileio.makedirs(model_dir)
    probe = fileio.join(model_dir, f".write_probe-{os.getpid()}")
    fileio.write_text(probe, "ok")
    fileio.remove(probe)
  except (OSError, tf.errors.OpError) as e:
    raise PretrainingError(
        f"--model_dir {model_dir} is not writable ({errors.one_line(e)}). "
        "Choose a directory you can create and write to.") from None


def _input_files(input_path) -> List[str]:
  patterns = input_path
  if isinstance(patterns, str):
    patterns = [p for p in patterns.split(",") if p]
  files = []
  for pattern in patterns:
    files.extend(fileio.glob(pattern))
  return files


def _data_sections(config: cfg.ExperimentConfig, mode: str):
  sections = []
  if "train" in mode:
    sections.append(("task.train_data", config.task.train_data))
  if "eval" in mode:
    sections.append(("task.validation_data", config.task.validation_data))
  return sections


def check_data(config: cfg.ExperimentConfig, mode: str) -> None:
  """Missing records or records that do not match the model: clear errors."""
  for field, data in _data_sections(config, mode):
    if data.global_batch_size <= 0:
      raise PretrainingError(f"{field}.global_batch_size must be > 0, got "
                             f"{data.global_batch_size}.")
    if data.input_path == masked_lm_task.SYNTHETIC_INPUT_PATH:
      continue
    if not data.input_path:
      raise PretrainingError(
          f"{field}.input_path is empty: set it to the records' glob (e.g. "
          f"--params_override {field}.input_path=/data/records/*.tfrecord).")
    if not _input_files(data.input_path):
      raise PretrainingError(
          f"{field}.input_path {data.input_path!r} matches no file. Make the "
          "records first (tools/create_pretraining_data.py) or fix the path.")
    if data.check_metadata:
      pretraining_input_pipeline.check_records_compatible(data,
                                                          config.task.model)


def remove_stale_checkpoint_temporaries(model_dir: str) -> List[str]:
  """Removes `ckpt-N_temp` left by a save that failed or was killed."""
  removed = []
  for directory in (model_dir,
                    fileio.join(model_dir, checkpoint_layout.ENCODER_SUBDIR)):
    for stale in fileio.glob(fileio.join(directory, CHECKPOINT_TEMP_GLOB)):
      fileio.rmtree(stale)
      removed.append(stale)
  removed += fileio.remove_stale_temporaries(fileio.join(model_dir, PARAMS_FILE))
  return removed


def checkpoint_reader(prefix: str):
  """A reader of a checkpoint prefix. `tf.train.list_variables` first asks
  whether the prefix is a directory, which some filesystems (ram://) answer
  yes for any prefix; the reader opens the prefix itself."""
  return tf.compat.v1.train.NewCheckpointReader(prefix)


def _escape(name: str) -> str:
  return name.replace(".", "..").replace("/", ".S")


def expected_checkpoint_variables(checkpoint: tf.train.Checkpoint,
                                  model: tf_keras.Model) -> Dict[str, List[int]]:
  """Checkpoint keys -> shapes of the model's variables in `checkpoint`."""
  from tensorflow.python.checkpoint import graph_view  # pylint: disable=g-import-not-at-top
  _, paths = graph_view.ObjectGraphView(checkpoint).breadth_first_traversal()
  expected = {}
  for variable in model.variables:
    refs = paths.get(variable)
    if refs is None:
      continue
    key = "/".join(_escape(r.name) for r in refs)
    expected[f"{key}/.ATTRIBUTES/VARIABLE_VALUE"] = list(variable.shape)
  return expected


def _model_config_differences(model_dir, model_config) -> List[str]:
  config_path = fileio.join(model_dir, checkpoint_layout.MODEL_CONFIG_FILE)
  if not fileio.exists(config_path):
    return []
  saved = rembert_config.load_model_config(config_path)
  diffs = [f"{k}: {getattr(saved, k)!r} in model_dir, {getattr(model_config, k)!r} now"
           for k in rembert_config.field_names()
           if getattr(saved, k) != getattr(model_config, k)]
  return ["model config fields differ: " + "; ".join(diffs)] if diffs else []


def _variable_differences(latest, trainer) -> List[str]:
  expected = expected_checkpoint_variables(trainer.checkpoint, trainer.model)
  roots = {k.split("/")[0] for k in expected}
  in_checkpoint = {
      name: shape
      for name, shape in checkpoint_reader(latest).get_variable_to_shape_map().items()
      if name.endswith("/.ATTRIBUTES/VARIABLE_VALUE")
      and ".OPTIMIZER_SLOT" not in name and name.split("/")[0] in roots}
  missing = sorted(set(expected) - set(in_checkpoint))
  unexpected = sorted(set(in_checkpoint) - set(expected))
  reshaped = sorted(k for k in set(expected) & set(in_checkpoint)
                    if list(expected[k]) != list(in_checkpoint[k]))
  short = lambda k: k.replace("/.ATTRIBUTES/VARIABLE_VALUE", "")

  def listing(keys, fmt):
    head = [fmt(k) for k in keys[:8]]
    more = f" (+{len(keys) - 8} more)" if len(keys) > 8 else ""
    return ", ".join(head) + more

  problems = []
  if reshaped:
    problems.append("variables with other shapes: " + listing(
        reshaped, lambda k: f"{short(k)} {in_checkpoint[k]} in checkpoint vs "
        f"{expected[k]} in the model"))
  if missing:
    problems.append("model variables missing from the checkpoint: " +
                    listing(missing, short))
  if unexpected:
    problems.append("checkpoint variables the model lacks: " +
                    listing(unexpected, short))
  return problems


def check_checkpoint_compatible(model_dir: str, trainer: base_trainer.Trainer,
                                model_config: rembert_config.RemBertConfig):
  """Refuses a model_dir whose checkpoint is of another model (nothing written)."""
  latest = tf.train.latest_checkpoint(model_dir)
  if latest is None:
    return None
  problems = (_model_config_differences(model_dir, model_config) +
              _variable_differences(latest, trainer))
  if problems:
    raise CheckpointMismatchError(
        f"--model_dir {model_dir} holds a checkpoint of a different model "
        f"({latest}); refusing to resume or overwrite it. " +
        " | ".join(problems) +
        ". Use a new --model_dir, or the config this directory was trained "
        f"with ({fileio.join(model_dir, PARAMS_FILE)}).")
  return latest


def checkpoint_step(checkpoint_path: str) -> int:
  try:
    return int(checkpoint_reader(checkpoint_path).get_tensor(
        "global_step/.ATTRIBUTES/VARIABLE_VALUE"))
  except (ValueError, tf.errors.NotFoundError, tf.errors.OpError):
    return 0


def _records_metadata_path(data_config) -> Optional[str]:
  if data_config.input_path in ("", masked_lm_task.SYNTHETIC_INPUT_PATH):
    return None
  files = _input_files(data_config.input_path)
  if not files:
    return None
  meta_path = fileio.join(fileio.dirname(files[0]), "metadata.json")
  return meta_path if fileio.exists(meta_path) else None


def _named_sentencepiece_models(meta: Dict[str, Any]) -> List[str]:
  candidates = [meta[key] for key in ("sentencepiece_model", "spm_model",
                                      "tokenizer_model")
                if isinstance(meta.get(key), str)]
  tok = meta.get("tokenizer")
  if isinstance(tok, dict):
    candidates += [tok[k] for k in ("model", "path", "sentencepiece_model")
                   if isinstance(tok.get(k), str)]
  elif isinstance(tok, str):
    candidates.append(tok)
  return candidates


def sentencepiece_model_of(data_config) -> Optional[str]:
  """The SentencePiece model the records' metadata.json names, if it exists."""
  meta_path = _records_metadata_path(data_config)
  if meta_path is None:
    return None
  for named in _named_sentencepiece_models(fileio.read_json(meta_path)):
    # A relative name is relative to where the data tool ran, or else to the
    # records' folder.
    paths = [named]
    if not fileio.is_remote(named) and not os.path.isabs(named):
      paths.append(fileio.join(fileio.dirname(meta_path), named))
    for path in paths:
      if fileio.exists(path):
        return path
  return None


def records_sentencepiece_sha256(data_config):
  """(sha256, metadata path, named model) of the records' tokenizer, or Nones."""
  meta_path = _records_metadata_path(data_config)
  if meta_path is None:
    return None, None, None
  meta = fileio.read_json(meta_path)
  named = sentencepiece_model_of(data_config)
  tok = meta.get("tokenizer") if isinstance(meta.get("tokenizer"), dict) else {}
  sha = meta.get("sentencepiece_sha256") or tok.get("sha256")
  if not sha and named:
    sha = fileio.sha256(named)
  return sha, meta_path, named


def check_sentencepiece_matches(model_dir: str, data_config,
                                allow_mismatch: bool = False,
                                warn: Callable[[str], None] = logging.warning
                                ) -> bool:
  """A resume on records of another SentencePiece model is refused.

  Compares the sha256 of `model_dir/sentencepiece.model` (the tokenizer the
  checkpoint was trained with) with the one the records' metadata.json
  records. With `allow_mismatch` a mismatch is a warning, and the records'
  model (when available) replaces model_dir's. Returns True on a mismatch.
  """
  ours = fileio.join(model_dir, checkpoint_layout.SENTENCEPIECE_FILE)
  if not fileio.exists(ours):
    return False
  records_sha, meta_path, named = records_sentencepiece_sha256(data_config)
  if not records_sha:
    return False
  our_sha = fileio.sha256(ours)
  if our_sha == records_sha:
    return False
  message = (
      f"the records were made with another SentencePiece model than this "
      f"run: {meta_path} records sha256 {records_sha}"
      f"{f' ({named})' if named else ''}, but {ours} (the model the "
      f"checkpoint was trained with) has sha256 {our_sha}.")
  if not allow_mismatch:
    raise TokenizerMismatchError(
        message + " Use records made with that model, or a new --model_dir; "
        "--allow_sentencepiece_mismatch goes on anyway.")
  warn(message + " Going on (--allow_sentencepiece_mismatch)"
       + (f"; {ours} is replaced by {named}." if named else "."))
  if named:
    fileio.copy(named, ours, overwrite=True)
  return True


def find_corrupt_shard(data_config) -> Optional[str]:
  """The first shard of `input_path` that does not read to its end, with the
  reader's message; None if all read (reads every shard: for the error path)."""
  for path in _input_files(data_config.input_path):
    try:
      for _ in tf.data.TFRecordDataset(path):
        pass
    except tf.errors.OpError as e:
      return f"{path} ({errors.one_line(e.message).split(' [Op:')[0]})"
  return None


# ---------------------------------------------------------------------------
# Orbit pieces.
class PretrainTrainer(base_trainer.Trainer):
  """Model Garden's Trainer, plus wall-clock examples/s in the loop logs and a
  stop check between steps.

  orbit runs a loop of `steps_per_loop` steps as one device call; a Python
  signal handler only runs when that call returns, so with thousands of steps
  per loop a SIGTERM would wait minutes. Here the loop is dispatched in calls
  of `stop_check_steps` steps; after each, `between_steps_hooks` run and the
  loop ends early when `stop_requested()` says so.
  """
  stop_check_steps: int = 1
  stop_requested: Optional[Callable[[], bool]] = None
  between_steps_hooks: List[Callable[[], None]] = []

  def train(self, num_steps: tf.Tensor):
    self.train_loop_begin()
    if self._train_loop_fn is None:
      self._train_loop_fn = self.create_train_loop_fn()
    if self._train_iter is None:
      self._train_iter = tf.nest.map_structure(iter, self.train_dataset)
    remaining = int(num_steps)
    while remaining > 0:
      steps = min(remaining, max(1, self.stop_check_steps))
      self._train_loop_fn(self._train_iter, tf.constant(steps, tf.int32))
      remaining -= steps
      logging.log_every_n_seconds(
          logging.INFO, "training: at step %d", HEARTBEAT_SECONDS,
          int(self.global_step.numpy()))
      for hook in self.between_steps_hooks:
        hook()
      if remaining and self.stop_requested and self.stop_requested():
        break
    return self.train_loop_end()

  def train_loop_begin(self):
    super().train_loop_begin()
    self._loop_start_time = time.time()
    self._loop_start_step = int(self.global_step.numpy())

  def train_loop_end(self):
    logs = super().train_loop_end()
    logs = {k: float(np.asarray(v)) for k, v in logs.items()}
    elapsed = max(time.time() - self._loop_start_time, 1e-9)
    steps = int(self.global_step.numpy()) - self._loop_start_step
    logs["examples_per_second"] = (
        steps * self.config.task.train_data.global_batch_size / elapsed)
    return logs


class ExportingController(orbit.Controller):
  """orbit.Controller that writes the fine-tuning artefacts after every save,
  leaves no partial checkpoint when a save fails, and saves-then-stops when a
  SIGTERM was received."""

  def __init__(self, *args, after_save=None, preemption=None, model_dir=None,
               **kwargs):
    self._after_save = after_save
    self._preemption = preemption
    self._model_dir = model_dir
    self._last_saved_step = 0
    super().__init__(*args, **kwargs)
    self._last_saved_step = int(self.global_step.numpy())  # after restore

  def _save_now(self, final: bool):
    step = int(self.global_step.numpy())
    try:
      saved = super()._maybe_save_checkpoint(check_interval=False)
      # The final save of a step already saved is skipped by the manager;
      # the artefacts still get their final export.
      latest = self.checkpoint_manager.latest_checkpoint
      exists = bool(latest) and latest.endswith(f"ckpt-{step}")
      if (saved or (final and exists)) and self._after_save:
        self._after_save(step, final)
    except (OSError, tf.errors.OpError) as e:
      raise self._save_failed(step, e) from None
    if saved:
      self._last_saved_step = step
    return saved

  def _save_failed(self, step, error) -> PretrainingError:
    removed = []
    if self._model_dir and fileio.isdir(self._model_dir):
      removed = remove_stale_checkpoint_temporaries(self._model_dir)
    latest = self.checkpoint_manager.latest_checkpoint
    return PretrainingError(
        f"writing the checkpoint of step {step} to {self._model_dir} failed "
        f"({errors.one_line(error)}); removed the partial files "
        f"({', '.join(removed) or 'none'}). The newest complete checkpoint is "
        f"{latest or '(none yet)'}. Free disk space or fix the permissions, "
        "then run the same command again: it resumes from there.")

  def _maybe_save_checkpoint(self, check_interval: bool = True):
    """Saves at multiples of checkpoint_interval (CheckpointManager's own
    interval counts from the first save, which lands on step 1 or on
    whatever step a run resumed at)."""
    if self._preemption is not None and self._preemption.is_set():
      self._save_now(final=True)
      path = self.checkpoint_manager.latest_checkpoint
      step = int(self.global_step.numpy())
      raise TrainingPreempted(
          f"SIGTERM received: saved {path} at step {step} and stopped. Run "
          "the same command again to resume.", step, path)
    step = int(self.global_step.numpy())
    interval = (self.checkpoint_manager.checkpoint_interval
                if self.checkpoint_manager else None)
    if check_interval and interval:
      if step // interval <= self._last_saved_step // interval:
        return False
    return self._save_now(final=not check_interval)


class NonFiniteLossGuard:
  """Train action: stops on a NaN/inf loss before the loop's weights are saved."""

  def __init__(self, global_step, checkpoint_manager_fn):
    self._global_step = global_step
    self._checkpoint_manager_fn = checkpoint_manager_fn

  def __call__(self, output):
    loss = float(np.asarray(output.get("training_loss", 0.0)))
    if not np.isfinite(loss):
      manager = self._checkpoint_manager_fn()
      last = manager.latest_checkpoint if manager else None
      raise NonFiniteLossError(
          f"training loss is {loss} at step {int(self._global_step.numpy())}; "
          f"stopped without saving these weights. The last good checkpoint is "
          f"{last or '(none yet)'}. Lower the learning rate, raise the warmup, "
          "or check the records, then run again (it resumes from there).")


class ProgressPrinter:
  """Train action: one console line per loop (`console.loop_line`), e.g.
  `step  40/300 | loss 5.2104 | mlm_acc 0.1130 | 812 ex/s | lr 1.00e-04 | ETA 1:02`."""

  def __init__(self, global_step, total_steps: int, print_fn=print):
    self._global_step = global_step
    self._total_steps = total_steps
    self._print = print_fn
    # Paced from the first loop's end: its time includes the compilation.
    self._eta = console.Eta(total_steps)
    self.last_logs: Dict[str, float] = {}

  def __call__(self, output):
    step = int(self._global_step.numpy())
    logs = {k: float(np.asarray(v)) for k, v in output.items()}
    self.last_logs = dict(logs, global_step=step)
    line = console.loop_line(
        step, self._total_steps, loss=logs.get("training_loss"),
        accuracy=logs.get("masked_lm_accuracy"), accuracy_name="mlm_acc",
        examples_per_second=logs.get("examples_per_second"),
        learning_rate=logs.get("learning_rate"),
        eta_seconds=self._eta.observe(step))
    self._print(line)
    logging.info("%s | grad_norm %.3f", line, logs.get("gradient_norm", 0.0))


class EvalRecorder:
  """Eval action: keeps the last evaluation's metrics and prints them."""

  def __init__(self, global_step, print_fn=print):
    self._global_step = global_step
    self._print = print_fn
    self.last_logs: Dict[str, float] = {}

  def __call__(self, output):
    logs = {k: float(np.asarray(v)) for k, v in output.items()
            if np.asarray(v).size == 1}
    self.last_logs = logs
    line = (f"eval at step {int(self._global_step.numpy())} | mlm_loss "
            f"{logs.get('lm_example_loss', float('nan')):.4f} | mlm_acc "
            f"{logs.get('masked_lm_accuracy', float('nan')):.4f}")
    self._print(line)
    logging.info(line)


class _SigtermFlag:
  """Installs a SIGTERM handler that sets a flag (main thread only)."""

  def __init__(self):
    self.event = threading.Event()
    self._previous = None
    self._installed = False

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      self._previous = signal.signal(signal.SIGTERM, self._handle)
      self._installed = True
    return self.event

  def _handle(self, signum, frame):
    del signum, frame
    logging.warning("SIGTERM received: saving a checkpoint after this step.")
    self.event.set()

  def __exit__(self, *exc):
    if self._installed:
      signal.signal(signal.SIGTERM, self._previous or signal.SIG_DFL)
    return False


class ArtifactWriter:
  """After each save: model_config.yaml, encoder/ckpt-N, sentencepiece.model.

  Built on every worker (the encoder export is a collective under
  MultiWorkerMirroredStrategy); workers other than the chief write into a
  temporary local directory that `close` deletes.
  """

  def __init__(self, config, model_dir, encoder, is_chief: bool,
               sentencepiece_path: Optional[str]):
    self._config = config
    self._model_dir = model_dir
    self._is_chief = is_chief
    self._spm_path = sentencepiece_path
    self._export_dir = model_dir if is_chief else tempfile.mkdtemp(
        prefix="rembert_tf-worker-export-")
    self.encoder_writer = checkpoint_restore.EncoderExportWriter(
        encoder, self._export_dir, max_to_keep=config.trainer.max_to_keep,
        every_n_saves=getattr(config.trainer,
                              "encoder_export_every_n_checkpoints", 1))

  def __call__(self, step: int, final: bool = False):
    self.encoder_writer.save(step, final=final)
    if not self._is_chief:
      return
    config_path = fileio.join(self._model_dir,
                              checkpoint_layout.MODEL_CONFIG_FILE)
    if not fileio.exists(config_path):
      rembert_config.save_model_config(self._config.task.model, config_path)
    spm_target = fileio.join(self._model_dir,
                             checkpoint_layout.SENTENCEPIECE_FILE)
    if self._spm_path and not fileio.exists(spm_target):
      fileio.copy(self._spm_path, spm_target)

  def close(self):
    if not self._is_chief:
      fileio.rmtree(self._export_dir)


class ExperimentRunner(train_lib.OrbitExperimentRunner):
  """Model Garden's experiment runner; on a worker other than the chief, the
  run starts from the chief's newest checkpoint in model_dir.

  Model Garden gives such a worker a CheckpointManager on an empty temporary
  directory (every worker must save: saving reads variables, a collective),
  so on a resume it would initialise while the chief restores, and their
  collectives (the variables a restore creates) would no longer match.
  """

  def _maybe_build_checkpoint_manager(self):
    strategy = self.strategy
    if (not self.trainer.checkpoint or strategy is None
        or strategy.extended.should_checkpoint):
      return super()._maybe_build_checkpoint_manager()
    latest = tf.train.latest_checkpoint(self.model_dir)
    checkpoint, trainer = self.trainer.checkpoint, self.trainer
    self.worker_checkpoint_dir = tempfile.mkdtemp(prefix="rembert_tf-worker-ckpt-")

    def start_like_the_chief():
      if latest:
        checkpoint.restore(latest)
      else:
        trainer.initialize()

    return tf.train.CheckpointManager(
        checkpoint, directory=self.worker_checkpoint_dir, max_to_keep=1,
        step_counter=trainer.global_step,
        checkpoint_interval=self.params.trainer.checkpoint_interval,
        init_fn=start_like_the_chief)


# ---------------------------------------------------------------------------
# The entry point.
def run(experiment_config: cfg.ExperimentConfig,
        model_dir: str,
        mode: str = "train",
        strategy: Union[str, tf.distribute.Strategy, None] = "one_device",
        tpu: Optional[str] = None,
        mixed_precision: Optional[str] = None,
        deterministic: bool = False,
        seed: Optional[int] = None,
        allow_sentencepiece_mismatch: bool = False,
        print_fn: Callable[[str], None] = print) -> Dict[str, Any]:
  """Pre-trains (and/or evaluates) under tf.distribute; resumes from model_dir.

  Args:
    experiment_config: From `experiments.load_experiment_config`.
    model_dir: Checkpoints (`ckpt-N`), `encoder/`, `model_config.yaml`,
      `params.yaml`, TensorBoard summaries (`train/`, `validation/`). Any
      TensorFlow filesystem (a local path, gs://, ram://).
    mode: "train", "eval" (needs a checkpoint in model_dir) or
      "train_and_eval" (evaluates every trainer.validation_interval steps and
      at the end).
    strategy: A name of STRATEGIES or a tf.distribute.Strategy instance.
    tpu: TPU name / grpc address for strategy "tpu" (none on a TPU VM).
    mixed_precision: "float32" or "mixed_bfloat16"; None keeps
      runtime.mixed_precision_dtype of the config.
    deterministic: Enables TF op determinism and seeds every RNG, so a resumed
      run ends with the same weights as an uninterrupted one (with dropout 0).
    seed: Random seed (default 0 when deterministic).
    allow_sentencepiece_mismatch: Resume although the records were made with
      another SentencePiece model than model_dir's (a warning, not an error).
    print_fn: Where the console progress lines go.

  Returns:
    Final metrics: global_step, train_loss, train_masked_lm_accuracy,
    train_examples_per_second (last training loop), eval_loss,
    eval_masked_lm_accuracy (weighted over all eval predictions; eval modes),
    checkpoint (newest full checkpoint), model_dir.

  Raises:
    PretrainingError and the other `errors.RemBertError`s (bad model_dir,
    data, strategy, tokenizer, config), NonFiniteLossError, TrainingPreempted.
  """
  config = _resolved_config(experiment_config, mode, mixed_precision)
  model_dir = fileio.as_str(model_dir).rstrip("/")
  check_model_dir_writable(model_dir)
  check_data(config, mode)

  if isinstance(strategy, str) or strategy is None:
    strategy = make_strategy(strategy or "one_device", tpu)
  multi_worker = _is_multi_worker(strategy)
  if deterministic:
    tf.config.experimental.enable_op_determinism()
  if deterministic or seed is not None:
    tf_keras.utils.set_random_seed(0 if seed is None else seed)

  previous_policy = tf_keras.mixed_precision.global_policy()
  performance.set_mixed_precision_policy(
      tf.bfloat16 if config.runtime.mixed_precision_dtype == "bfloat16"
      else tf.float32)
  try:
    return _run(config, model_dir, mode, strategy, multi_worker,
                allow_sentencepiece_mismatch, print_fn)
  except tf.errors.DataLossError as e:
    raise _corrupt_records_error(config, mode, e) from None
  finally:
    tf_keras.mixed_precision.set_global_policy(previous_policy)


def _resolved_config(experiment_config, mode, mixed_precision):
  """A copy of the config with the command's choices applied, checked."""
  if mode not in MODES:
    raise PretrainingError(f"--mode {mode!r}: expected one of {', '.join(MODES)}.")
  config = experiment_config.replace()  # never mutate the caller's config
  if mixed_precision is not None:
    if mixed_precision not in PRECISIONS:
      raise PretrainingError(f"--mixed_precision {mixed_precision!r}: expected "
                             "float32 or mixed_bfloat16.")
    config.runtime.mixed_precision_dtype = PRECISIONS[mixed_precision]
  # The task compiles forward+backward itself; Model Garden's GPU-only
  # whole-step jit would wrap the cross-replica all-reduce as well.
  config.runtime.enable_xla = False
  # Preemption saves are this runner's (SIGTERM flag, or TF's
  # PreemptionCheckpointHandler checked between steps on several workers).
  config.trainer.preemption_on_demand_checkpoint = False
  config.task.model.validate()
  experiments.check_trainer_config(config.trainer)
  return config


def _corrupt_records_error(config, mode, error) -> PretrainingError:
  for field, data in _data_sections(config, mode):
    if data.input_path in ("", masked_lm_task.SYNTHETIC_INPUT_PATH):
      continue
    culprit = find_corrupt_shard(data)
    if culprit:
      return CorruptRecordsError(
          f"{field}.input_path: record shard {culprit} is corrupted or "
          "truncated. Recreate the records (tools/create_pretraining_data.py "
          "--overwrite) or copy the shard again, then run the same command: "
          "it resumes from the newest checkpoint.")
  return CorruptRecordsError(
      f"reading the records failed ({errors.one_line(error)}); a shard is "
      "corrupted or truncated. Recreate the records.")


def _run(config, model_dir, mode, strategy, multi_worker,
         allow_sentencepiece_mismatch, print_fn):
  is_chief = (not multi_worker) or strategy.extended.should_checkpoint
  task, latest = _build_task(config, model_dir, mode)
  with strategy.scope():
    trainer = train_utils.create_trainer(
        config, task, train="train" in mode, evaluate="eval" in mode,
        trainer_cls=PretrainTrainer)
  check_checkpoint_compatible(model_dir, trainer, config.task.model)
  if latest is not None and "train" in mode:
    check_sentencepiece_matches(model_dir, config.task.train_data,
                                allow_sentencepiece_mismatch, print_fn)
  if is_chief:  # Nothing was written before this point.
    remove_stale_checkpoint_temporaries(model_dir)
    experiments.save_experiment_config(
        config, fileio.join(model_dir, PARAMS_FILE))

  artifacts = ArtifactWriter(config, model_dir, trainer.model.encoder, is_chief,
                             sentencepiece_model_of(config.task.train_data))
  progress = ProgressPrinter(trainer.global_step, config.trainer.train_steps,
                             print_fn)
  evaluations = EvalRecorder(trainer.global_step, print_fn)
  experiment = None
  try:
    # orbit's controller lines go to the log only: the console has ours.
    with _SigtermFlag() as sigterm, console.orbit_logs_to_file():
      experiment = _build_experiment_runner(
          config, task, trainer, strategy, mode, model_dir, artifacts,
          None if multi_worker else sigterm, progress, evaluations)
      _install_stop_checks(trainer, config, strategy, multi_worker, sigterm,
                           experiment.checkpoint_manager)
      if latest and "train" in mode:
        print_fn(f"resumed from {latest} at step "
                 f"{int(trainer.global_step.numpy())}")
      experiment.run()
    return _final_metrics(trainer, experiment, model_dir, progress,
                          evaluations)
  finally:
    artifacts.close()
    if experiment is not None and getattr(experiment, "worker_checkpoint_dir", None):
      fileio.rmtree(experiment.worker_checkpoint_dir)


def _build_task(config, model_dir, mode):
  latest = tf.train.latest_checkpoint(model_dir)
  if mode == "eval" and latest is None:
    raise PretrainingError(
        f"--mode eval: --model_dir {model_dir} holds no checkpoint to evaluate "
        "(expected ckpt-N files and a `checkpoint` index). Train first, or "
        "point --model_dir at a pre-training run.")
  task = task_factory.get_task(config.task, logging_dir=model_dir)
  if latest is not None:
    task.initial_train_step = checkpoint_step(latest)
  return task, latest


def _build_experiment_runner(config, task, trainer, strategy, mode, model_dir,
                             artifacts, preemption, progress, evaluations):
  """Model Garden's OrbitExperimentRunner with this module's controller."""
  runner_box = {}
  guard = NonFiniteLossGuard(
      trainer.global_step,
      lambda: runner_box["runner"].checkpoint_manager if runner_box else None)
  controller_cls = lambda **kwargs: ExportingController(  # pylint: disable=g-long-lambda
      after_save=artifacts, preemption=preemption, model_dir=model_dir,
      **kwargs)
  try:
    experiment = ExperimentRunner(
        distribution_strategy=strategy, task=task, mode=mode, params=config,
        model_dir=model_dir, trainer=trainer,
        train_actions=[guard, progress] if "train" in mode else None,
        eval_actions=[evaluations], controller_cls=controller_cls)
  except ValueError as e:  # orbit / Model Garden refusing a trainer setting
    raise PretrainingError(
        f"experiment config: {errors.one_line(e)}. Fix the named trainer.* "
        "field in --config or --params_override.") from None
  runner_box["runner"] = experiment
  return experiment


def _install_stop_checks(trainer, config, strategy, multi_worker, sigterm,
                         checkpoint_manager):
  """Between steps: the SIGTERM flag (one host) or TF's preemption handler."""
  trainer.stop_check_steps = getattr(config.trainer, "stop_check_steps", 1)
  # One worker must never leave the loop alone (the others would wait in a
  # collective): on several workers only the handler below stops the run.
  trainer.stop_requested = None if multi_worker else sigterm.is_set
  trainer.between_steps_hooks = []
  if multi_worker and strategy.cluster_resolver is not None:
    # Saves (all workers together) and exits 42 once a preemption notice
    # reached any worker; called at the same steps on every worker.
    action = orbit.actions.SaveCheckpointIfPreempted(
        strategy.cluster_resolver, checkpoint_manager, trainer.global_step)
    trainer.between_steps_hooks.append(lambda: action(None))


def _final_metrics(trainer, experiment, model_dir, progress, evaluations
                   ) -> Dict[str, Any]:
  metrics: Dict[str, Any] = {
      "global_step": int(trainer.global_step.numpy()),
      "model_dir": model_dir,
      "checkpoint": experiment.checkpoint_manager.latest_checkpoint,
  }
  if progress.last_logs:
    metrics.update(
        train_loss=progress.last_logs.get("training_loss"),
        train_masked_lm_accuracy=progress.last_logs.get("masked_lm_accuracy"),
        train_examples_per_second=progress.last_logs.get("examples_per_second"))
  if evaluations.last_logs:
    metrics.update(
        eval_loss=evaluations.last_logs.get("lm_example_loss"),
        eval_masked_lm_accuracy=evaluations.last_logs.get("masked_lm_accuracy"))
  return metrics
