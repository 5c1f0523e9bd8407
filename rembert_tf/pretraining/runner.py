"""Runs a pre-training experiment: the library behind `python -m rembert_tf.train`.

Builds on Model Garden's `official.core.train_lib.run_experiment` (orbit
Controller + `base_trainer.Trainer`), adding what a resumable, preemptible
RemBERT job needs around it:

* checks before the first step: a writable `model_dir`; existing data for the
  mode; records that match the model (`check_records_compatible`: vocab size,
  sequence length, predictions per sequence); and a `model_dir` whose
  checkpoint belongs to this model (refused, naming the mismatching variables
  and config fields, without writing anything);
* a checkpoint every `trainer.checkpoint_interval` steps keeping
  `trainer.max_to_keep` (Model Garden's CheckpointManager), automatic resume
  (step, weights, optimizer slots; the input stream skips the consumed
  batches), a save on SIGTERM (single-host; multi-worker jobs use TF's
  `PreemptionCheckpointHandler` through Model Garden's on-demand action);
* after every save the fine-tuning artefacts next to the full checkpoint, per
  `rembert_tf.modeling.checkpoints`: `model_config.yaml`, `encoder/ckpt-N`,
  and `sentencepiece.model` when the records' metadata names one;
* TensorBoard summaries (`model_dir/train`, `model_dir/validation`: loss,
  masked_lm_accuracy, lm_example_loss, learning_rate, examples_per_second,
  gradient_norm, steps_per_second), a console line per loop of
  `trainer.steps_per_loop` steps, and a stop with a clear message on a NaN /
  inf loss, before that loop's weights can be saved.

Example (what `rembert_tf/demo.py` does in-process):
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
import json
import math
import os
import shutil
import signal
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Union

from absl import logging
import numpy as np
import orbit
import tensorflow as tf
import tf_keras
from official.core import base_trainer
from official.core import config_definitions as cfg
from official.core import task_factory
from official.core import train_lib
from official.core import train_utils
from official.modeling import performance

from rembert_tf.data import pretrain_dataloader
from rembert_tf.modeling import checkpoints
from rembert_tf.modeling import rembert_config
from rembert_tf.pretraining import experiments
from rembert_tf.pretraining import masked_lm_task

MODES = ("train", "eval", "train_and_eval")
STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")
PRECISIONS = {"float32": "float32", "mixed_bfloat16": "bfloat16",
              "bfloat16": "bfloat16"}
PARAMS_FILE = "params.yaml"
PREEMPTED_EXIT_CODE = 42  # TF's PreemptionCheckpointHandler uses 42 as well.


class PretrainingError(ValueError):
  """A pre-training run cannot start; the message names the cause and fix."""


class CheckpointMismatchError(PretrainingError):
  """model_dir holds a checkpoint of a different model."""


class NonFiniteLossError(RuntimeError):
  """The training loss became NaN or inf; the last good checkpoint is kept."""


class TrainingPreempted(RuntimeError):
  """SIGTERM arrived; a checkpoint was saved and the run stopped."""

  def __init__(self, message, step, checkpoint_path):
    super().__init__(message)
    self.step = step
    self.checkpoint_path = checkpoint_path


# ---------------------------------------------------------------------------
# Distribution strategies.
def _tpu_hints() -> List[str]:
  hints = [p for p in ("/dev/accel0", "/dev/vfio/0") if os.path.exists(p)]
  hints += [f"${k}" for k in ("TPU_NAME", "COLAB_TPU_ADDR",
                             "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS")
            if os.environ.get(k)]
  return hints


def make_strategy(name: str, tpu: Optional[str] = None) -> tf.distribute.Strategy:
  """A tf.distribute strategy by flag name (see STRATEGIES).

  `tpu` is a TPU name or grpc:// address for TPUClusterResolver; without it
  the local TPU (TPU VM) is used. Fails at once when no TPU is in sight.
  """
  if name == "one_device":
    gpus = tf.config.list_logical_devices("GPU")
    return tf.distribute.OneDeviceStrategy("/gpu:0" if gpus else "/cpu:0")
  if name == "mirrored":
    return tf.distribute.MirroredStrategy()
  if name == "multi_worker_mirrored":
    return tf.distribute.MultiWorkerMirroredStrategy()
  if name == "tpu":
    if not tpu and not _tpu_hints():
      raise PretrainingError(
          "--strategy tpu: no TPU found on this machine (no /dev/accel*, no "
          "$TPU_NAME) and no --tpu given. Pass --tpu <name or grpc://host:8470> "
          "to use a remote TPU, or run on CPU/GPU with --strategy one_device "
          "or --strategy mirrored.")
    try:
      resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
          tpu=tpu or "local")
      if tpu not in (None, "", "local"):
        tf.config.experimental_connect_to_cluster(resolver)
      tf.tpu.experimental.initialize_tpu_system(resolver)
      return tf.distribute.TPUStrategy(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError) as e:
      raise PretrainingError(
          f"--strategy tpu --tpu {tpu or 'local'}: cannot connect to the TPU "
          f"({e}). Check the TPU name / address and that this VM can reach "
          "it.") from None
  raise PretrainingError(f"--strategy {name!r}: expected one of "
                         f"{', '.join(STRATEGIES)}.")


# ---------------------------------------------------------------------------
# Checks before the first step.
def check_model_dir_writable(model_dir: str) -> None:
  try:
    tf.io.gfile.makedirs(model_dir)
    probe = os.path.join(model_dir, f".write_probe-{os.getpid()}")
    with tf.io.gfile.GFile(probe, "w") as f:
      f.write("ok")
    tf.io.gfile.remove(probe)
  except (OSError, tf.errors.OpError) as e:
    message = getattr(e, "strerror", None) or getattr(e, "message", None) or e
    raise PretrainingError(
        f"--model_dir {model_dir} is not writable ({message}). Choose a "
        "directory you can create and write to.") from None


def _input_files(input_path) -> List[str]:
  patterns = input_path
  if isinstance(patterns, str):
    patterns = [p for p in patterns.split(",") if p]
  files = []
  for pattern in patterns:
    files.extend(tf.io.gfile.glob(pattern))
  return files


def check_data(config: cfg.ExperimentConfig, mode: str) -> None:
  """Missing records or records that do not match the model: clear errors."""
  sections = []
  if "train" in mode:
    sections.append(("task.train_data", config.task.train_data))
  if "eval" in mode:
    sections.append(("task.validation_data", config.task.validation_data))
  for field, data in sections:
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
    pretrain_dataloader.check_records_compatible(data, config.task.model)


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


def check_checkpoint_compatible(model_dir: str, trainer: base_trainer.Trainer,
                                model_config: rembert_config.RemBertConfig):
  """Refuses a model_dir whose checkpoint is of another model (nothing written)."""
  latest = tf.train.latest_checkpoint(model_dir)
  if latest is None:
    return None
  problems = []
  config_path = os.path.join(model_dir, checkpoints.MODEL_CONFIG_FILE)
  if tf.io.gfile.exists(config_path):
    saved = rembert_config.load_model_config(config_path)
    diffs = [f"{k}: {getattr(saved, k)!r} in model_dir, {getattr(model_config, k)!r} now"
             for k in rembert_config.field_names()
             if getattr(saved, k) != getattr(model_config, k)]
    if diffs:
      problems.append("model config fields differ: " + "; ".join(diffs))
  expected = expected_checkpoint_variables(trainer.checkpoint, trainer.model)
  in_checkpoint = {
      name: shape for name, shape in tf.train.list_variables(latest)
      if name.endswith("/.ATTRIBUTES/VARIABLE_VALUE")
      and ".OPTIMIZER_SLOT" not in name
      and name.split("/")[0] in {k.split("/")[0] for k in expected}}
  missing = sorted(set(expected) - set(in_checkpoint))
  unexpected = sorted(set(in_checkpoint) - set(expected))
  reshaped = sorted(k for k in set(expected) & set(in_checkpoint)
                    if list(expected[k]) != list(in_checkpoint[k]))
  short = lambda k: k.replace("/.ATTRIBUTES/VARIABLE_VALUE", "")

  def listing(keys, fmt):
    head = [fmt(k) for k in keys[:8]]
    more = f" (+{len(keys) - 8} more)" if len(keys) > 8 else ""
    return ", ".join(head) + more

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
  if problems:
    raise CheckpointMismatchError(
        f"--model_dir {model_dir} holds a checkpoint of a different model "
        f"({latest}); refusing to resume or overwrite it. " +
        " | ".join(problems) +
        ". Use a new --model_dir, or the config this directory was trained "
        f"with ({os.path.join(model_dir, PARAMS_FILE)}).")
  return latest


def checkpoint_step(checkpoint_path: str) -> int:
  try:
    return int(tf.train.load_variable(
        checkpoint_path, "global_step/.ATTRIBUTES/VARIABLE_VALUE"))
  except (ValueError, tf.errors.NotFoundError):
    return 0


def sentencepiece_model_of(data_config) -> Optional[str]:
  """The SentencePiece model the records' metadata.json names, if it exists."""
  if data_config.input_path in ("", masked_lm_task.SYNTHETIC_INPUT_PATH):
    return None
  files = _input_files(data_config.input_path)
  if not files:
    return None
  meta_path = os.path.join(os.path.dirname(files[0]), "metadata.json")
  if not tf.io.gfile.exists(meta_path):
    return None
  with tf.io.gfile.GFile(meta_path) as f:
    meta = json.load(f)
  candidates = []
  for key in ("sentencepiece_model", "spm_model", "tokenizer_model"):
    if isinstance(meta.get(key), str):
      candidates.append(meta[key])
  tok = meta.get("tokenizer")
  if isinstance(tok, dict):
    candidates += [tok[k] for k in ("model", "path", "sentencepiece_model")
                   if isinstance(tok.get(k), str)]
  elif isinstance(tok, str):
    candidates.append(tok)
  for path in candidates:
    if not os.path.isabs(path):
      path = os.path.join(os.path.dirname(meta_path), path)
    if tf.io.gfile.exists(path):
      return path
  return None


# ---------------------------------------------------------------------------
# Orbit pieces.
class PretrainTrainer(base_trainer.Trainer):
  """Model Garden's Trainer plus wall-clock examples/s in the loop logs."""

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
  """orbit.Controller that writes the fine-tuning artefacts after every save
  and saves-then-stops when a SIGTERM was received."""

  def __init__(self, *args, after_save=None, preemption=None, **kwargs):
    self._after_save = after_save
    self._preemption = preemption
    self._last_saved_step = 0
    super().__init__(*args, **kwargs)
    self._last_saved_step = int(self.global_step.numpy())  # after restore

  def _maybe_save_checkpoint(self, check_interval: bool = True):
    """Saves at multiples of checkpoint_interval (CheckpointManager's own
    interval counts from the first save, which lands on step 1 or on
    whatever step a run resumed at)."""
    if self._preemption is not None and self._preemption.is_set():
      super()._maybe_save_checkpoint(check_interval=False)
      path = self.checkpoint_manager.latest_checkpoint
      step = int(self.global_step.numpy())
      if self._after_save:
        self._after_save(step)
      raise TrainingPreempted(
          f"SIGTERM received: saved {path} at step {step} and stopped. Run "
          "the same command again to resume.", step, path)
    step = int(self.global_step.numpy())
    interval = (self.checkpoint_manager.checkpoint_interval
                if self.checkpoint_manager else None)
    if check_interval and interval:
      if step // interval <= self._last_saved_step // interval:
        return False
    saved = super()._maybe_save_checkpoint(check_interval=False)
    if saved:
      self._last_saved_step = step
      if self._after_save:
        self._after_save(step)
    return saved


class NonFiniteLossGuard:
  """Train action: stops on a NaN/inf loss before the loop's weights are saved."""

  def __init__(self, global_step, checkpoint_manager_fn):
    self._global_step = global_step
    self._checkpoint_manager_fn = checkpoint_manager_fn

  def __call__(self, output):
    loss = float(np.asarray(output.get("training_loss", 0.0)))
    if not math.isfinite(loss):
      manager = self._checkpoint_manager_fn()
      last = manager.latest_checkpoint if manager else None
      raise NonFiniteLossError(
          f"training loss is {loss} at step {int(self._global_step.numpy())}; "
          f"stopped without saving these weights. The last good checkpoint is "
          f"{last or '(none yet)'}. Lower the learning rate, raise the warmup, "
          "or check the records, then run again (it resumes from there).")


class ProgressPrinter:
  """Train action: `step 40/300 | loss 5.21 | mlm_acc 0.113 | 812 ex/s | ETA 0:01:02`."""

  def __init__(self, global_step, total_steps: int, print_fn=print):
    self._global_step = global_step
    self._total_steps = total_steps
    self._print = print_fn
    self._last_time = None
    self._last_step = None
    self.last_logs: Dict[str, float] = {}

  def __call__(self, output):
    step = int(self._global_step.numpy())
    now = time.time()
    logs = {k: float(np.asarray(v)) for k, v in output.items()}
    self.last_logs = dict(logs, global_step=step)
    eta = ""
    if self._last_time is not None and step > self._last_step:
      seconds_per_step = (now - self._last_time) / (step - self._last_step)
      remaining = max(self._total_steps - step, 0) * seconds_per_step
      eta = f" | ETA {time.strftime('%H:%M:%S', time.gmtime(remaining))}"
    self._last_time, self._last_step = now, step
    line = (f"step {step}/{self._total_steps} | loss "
            f"{logs.get('training_loss', float('nan')):.4f} | mlm_acc "
            f"{logs.get('masked_lm_accuracy', float('nan')):.4f} | "
            f"{logs.get('examples_per_second', 0.0):.1f} ex/s | lr "
            f"{logs.get('learning_rate', 0.0):.2e} | grad_norm "
            f"{logs.get('gradient_norm', 0.0):.3f}{eta}")
    self._print(line)
    logging.info(line)


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
    self._print(f"eval at step {int(self._global_step.numpy())} | mlm_loss "
                f"{logs.get('lm_example_loss', float('nan')):.4f} | mlm_acc "
                f"{logs.get('masked_lm_accuracy', float('nan')):.4f}")


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
    logging.warning("SIGTERM received: saving a checkpoint after this loop.")
    self.event.set()

  def __exit__(self, *exc):
    if self._installed:
      signal.signal(signal.SIGTERM, self._previous or signal.SIG_DFL)
    return False


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
# The entry point.
def run(experiment_config: cfg.ExperimentConfig,
        model_dir: str,
        mode: str = "train",
        strategy: Union[str, tf.distribute.Strategy, None] = "one_device",
        tpu: Optional[str] = None,
        mixed_precision: Optional[str] = None,
        deterministic: bool = False,
        seed: Optional[int] = None,
        print_fn: Callable[[str], None] = print) -> Dict[str, Any]:
  """Pre-trains (and/or evaluates) under tf.distribute; resumes from model_dir.

  Args:
    experiment_config: From `experiments.load_experiment_config`.
    model_dir: Checkpoints (`ckpt-N`), `encoder/`, `model_config.yaml`,
      `params.yaml`, TensorBoard summaries (`train/`, `validation/`).
    mode: "train", "eval" (needs a checkpoint in model_dir) or
      "train_and_eval" (evaluates every trainer.validation_interval steps and
      at the end).
    strategy: A name of STRATEGIES or a tf.distribute.Strategy instance.
    tpu: TPU name / grpc address for strategy "tpu".
    mixed_precision: "float32" or "mixed_bfloat16"; None keeps
      runtime.mixed_precision_dtype of the config.
    deterministic: Enables TF op determinism and seeds every RNG, so a resumed
      run ends with the same weights as an uninterrupted one (with dropout 0).
    seed: Random seed (default 0 when deterministic).
    print_fn: Where the console progress lines go.

  Returns:
    Final metrics: global_step, train_loss, train_masked_lm_accuracy,
    train_examples_per_second (last training loop), eval_loss,
    eval_masked_lm_accuracy (weighted over all eval predictions; eval modes),
    checkpoint (newest full checkpoint), model_dir.

  Raises:
    PretrainingError (bad model_dir / data / strategy), CheckpointMismatchError,
    DataMismatchError (records vs model), NonFiniteLossError, TrainingPreempted.
  """
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
  config.task.model.validate()
  model_dir = str(model_dir)

  check_model_dir_writable(model_dir)
  check_data(config, mode)

  if isinstance(strategy, str) or strategy is None:
    strategy = make_strategy(strategy or "one_device", tpu)
  multi_worker = _is_multi_worker(strategy)
  # Single-host jobs save on SIGTERM with our handler; multi-worker ones with
  # TF's PreemptionCheckpointHandler (Model Garden's on-demand action).
  config.trainer.preemption_on_demand_checkpoint = multi_worker

  if deterministic:
    tf.config.experimental.enable_op_determinism()
  if deterministic or seed is not None:
    tf_keras.utils.set_random_seed(0 if seed is None else seed)

  previous_policy = tf_keras.mixed_precision.global_policy()
  performance.set_mixed_precision_policy(
      tf.bfloat16 if config.runtime.mixed_precision_dtype == "bfloat16"
      else tf.float32)
  try:
    return _run(config, model_dir, mode, strategy, multi_worker, print_fn)
  finally:
    tf_keras.mixed_precision.set_global_policy(previous_policy)


def _run(config, model_dir, mode, strategy, multi_worker, print_fn):
  latest = tf.train.latest_checkpoint(model_dir)
  if mode == "eval" and latest is None:
    raise PretrainingError(
        f"--mode eval: --model_dir {model_dir} holds no checkpoint to evaluate "
        "(expected ckpt-N files and a `checkpoint` index). Train first, or "
        "point --model_dir at a pre-training run.")
  task = task_factory.get_task(config.task, logging_dir=model_dir)
  if latest is not None:
    task.initial_train_step = checkpoint_step(latest)

  with strategy.scope():
    trainer = train_utils.create_trainer(
        config, task, train="train" in mode, evaluate="eval" in mode,
        trainer_cls=PretrainTrainer)
  check_checkpoint_compatible(model_dir, trainer, config.task.model)

  # Nothing was written before this point.
  experiments.save_experiment_config(config, os.path.join(model_dir, PARAMS_FILE))
  spm_path = sentencepiece_model_of(config.task.train_data)
  encoder = trainer.model.encoder
  max_to_keep = config.trainer.max_to_keep
  write_artifacts = (not multi_worker) or strategy.extended.should_checkpoint

  def after_save(step: int):
    if not write_artifacts:
      return
    config_path = os.path.join(model_dir, checkpoints.MODEL_CONFIG_FILE)
    if not tf.io.gfile.exists(config_path):
      rembert_config.save_model_config(config.task.model, config_path)
    checkpoints.write_encoder_checkpoint(encoder, model_dir, step=step,
                                         max_to_keep=max_to_keep)
    spm_target = os.path.join(model_dir, checkpoints.SENTENCEPIECE_FILE)
    if spm_path and not tf.io.gfile.exists(spm_target):
      tmp = spm_target + ".tmp"
      shutil.copyfile(spm_path, tmp)
      os.replace(tmp, spm_target)

  progress = ProgressPrinter(trainer.global_step, config.trainer.train_steps,
                             print_fn)
  evaluations = EvalRecorder(trainer.global_step, print_fn)
  runner_box = {}
  guard = NonFiniteLossGuard(
      trainer.global_step,
      lambda: runner_box["runner"].checkpoint_manager if runner_box else None)

  with _SigtermFlag() as sigterm:
    controller_cls = lambda **kwargs: ExportingController(  # pylint: disable=g-long-lambda
        after_save=after_save,
        preemption=None if multi_worker else sigterm, **kwargs)
    runner = train_lib.OrbitExperimentRunner(
        distribution_strategy=strategy, task=task, mode=mode, params=config,
        model_dir=model_dir, trainer=trainer,
        train_actions=[guard, progress] if "train" in mode else None,
        eval_actions=[evaluations], controller_cls=controller_cls)
    runner_box["runner"] = runner
    restored = runner.checkpoint_manager.latest_checkpoint
    if restored and "train" in mode:
      print_fn(f"resumed from {restored} at step "
               f"{int(trainer.global_step.numpy())}")
    runner.run()

  metrics: Dict[str, Any] = {
      "global_step": int(trainer.global_step.numpy()),
      "model_dir": model_dir,
      "checkpoint": runner.checkpoint_manager.latest_checkpoint,
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
  # Make sure the fine-tuning artefacts exist for the newest checkpoint.
  if "train" in mode and metrics["checkpoint"] and not tf.io.gfile.exists(
      os.path.join(model_dir, checkpoints.MODEL_CONFIG_FILE)):
    after_save(metrics["global_step"])
  return metrics


def most_frequent_token_baseline(eval_data_config,
                                 vocab_size: int,
                                 train_data_config=None,
                                 max_batches: Optional[int] = None
                                 ) -> Dict[str, Any]:
  """Accuracy of always predicting the most frequent masked token.

  The token is chosen on `train_data_config`'s predictions when given (the
  fair baseline), otherwise on the eval predictions themselves. Predictions
  are weighted by masked_lm_weights, exactly as the MLM accuracy metric is.

  Returns {"accuracy", "token_id", "num_predictions"}.
  """
  def counts_of(data_config, limit):
    task = masked_lm_task.RemBertPretrainTask(
        masked_lm_task.RemBertPretrainTaskConfig(
            model=rembert_config.RemBertConfig(vocab_size=vocab_size)))
    data_config = data_config.replace(is_training=False)
    counts = np.zeros([vocab_size], np.float64)
    for i, batch in enumerate(task.build_inputs(data_config)):
      if limit is not None and i >= limit:
        break
      ids = batch["masked_lm_ids"].numpy().reshape(-1)
      weights = batch["masked_lm_weights"].numpy().reshape(-1)
      np.add.at(counts, ids, weights)
    return counts

  eval_counts = counts_of(eval_data_config, max_batches)
  reference = (counts_of(train_data_config, max_batches)
               if train_data_config is not None else eval_counts)
  token = int(np.argmax(reference))
  total = float(eval_counts.sum())
  return {"accuracy": float(eval_counts[token] / total) if total else 0.0,
          "token_id": token, "num_predictions": total}
