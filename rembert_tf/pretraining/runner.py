"""Runs a pre-training experiment: the library behind `rembert-train`.

Builds on Model Garden's `train_lib.OrbitExperimentRunner` (orbit's
Controller over `base_trainer.Trainer`) and `rembert_tf.runtime`. A run
checks model_dir (`model_directory`: one line each, nothing written; a
finished job says so), builds the task and trainer, checks a resume, then
trains and/or evaluates with this package's orbit actions (`training_loop`:
saves with the encoder export, NaN-loss stop, SIGTERM save and exit 42),
and names what fails mid-run in one line (a corrupted record shard, a lost
worker, a failed save).

Example:
<!-- snippet: not run: pre-trains the demo model (minutes on a CPU) and needs its records -->
```python
from rembert_tf.pretraining import experiments, runner
config = experiments.load_experiment_config(
    ["configs/experiments/pretrain_tiny_demo.yaml"],
    "task.train_data.input_path=/tmp/run/records/train/*.tfrecord,"
    "task.validation_data.input_path=/tmp/run/records/eval/*.tfrecord")
metrics = runner.run(config, "/tmp/run/pretrain", mode="train_and_eval")
metrics["eval_masked_lm_accuracy"], metrics["global_step"]
```
"""
from typing import Any, Callable, Dict, Optional, Tuple, Union

import tensorflow as tf
from official.core import base_task
from official.core import config_definitions as cfg
from official.core import task_factory
from official.core import train_lib

from rembert_tf.common import console
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.data import pretraining_input_pipeline
from rembert_tf.pretraining import experiments
from rembert_tf.pretraining import model_directory
from rembert_tf.pretraining import pretraining_errors
from rembert_tf.pretraining import training_loop
from rembert_tf.runtime import cluster_failures
from rembert_tf.runtime import orbit_loop
from rembert_tf.runtime import preemption
from rembert_tf.runtime import process_settings
from rembert_tf.runtime import stop_checks
from rembert_tf.runtime import strategies

MODES = ("train", "eval", "train_and_eval", "continuous_eval")


def run(experiment_config: cfg.ExperimentConfig,
        model_dir: str,
        mode: str = "train",
        strategy: Union[str, tf.distribute.Strategy, None] = (
            strategies.DEFAULT_STRATEGY),
        tpu: Optional[str] = None,
        mixed_precision: Optional[str] = None,
        deterministic: bool = False,
        seed: Optional[int] = None,
        allow_sentencepiece_mismatch: bool = False,
        print_fn: Callable[[str], None] = print) -> Dict[str, Any]:
  """Pre-trains (and/or evaluates) under tf.distribute; resumes from model_dir.

  Args:
    experiment_config: From `experiments.load_experiment_config`.
    model_dir: What `model_directory` lists, and TensorBoard summaries; on
      any TensorFlow filesystem (a local path, gs://, ram://).
    mode: One of MODES, as in Model Garden ("continuous_eval": beside a live
      trainer, writing model_dir/validation/ only).
    strategy: A name of `runtime.strategies.STRATEGIES` or a
      tf.distribute.Strategy instance.
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
    global_step, checkpoint (the newest complete one), model_dir; train_loss,
    train_masked_lm_accuracy, train_examples_per_second (last loop); eval_loss,
    eval_masked_lm_accuracy (over all eval predictions; eval modes).

  Raises:
    `errors.RemBertError`s: bad model_dir, data, strategy, tokenizer, config;
    NonFiniteLossError; TrainingPreempted.
  """
  config = _resolved_config(experiment_config, mode, mixed_precision)
  model_dir = fileio.as_str(model_dir).rstrip("/")
  finished = model_directory.finished_checkpoint(config, model_dir, mode)
  if finished and mode == "train_and_eval":  # nothing to train: evaluate
    mode, config = "eval", _evaluating_finished(
        experiment_config, finished, mixed_precision, print_fn)
  elif finished:  # a restart after the end: nothing to build, nothing written
    return _finished_run_metrics(config, model_dir, finished, print_fn)
  created = _outermost_missing(model_dir)  # what the checks' probe makes
  model_directory.check(config, model_dir, mode)
  strategy = _strategy(strategy, tpu, created)
  settings = process_settings.training_settings(
      _precision(config), deterministic=deterministic, seed=seed)
  writes_run = strategies.is_chief(strategy) and mode != "continuous_eval"
  with outputs.writing_shared_output(model_dir, writes_run), settings:
    try:
      return _run(config, model_dir, mode, strategy,
                  allow_sentencepiece_mismatch, print_fn)
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
      raise records_error(config, mode, e) from None


def _evaluating_finished(experiment_config: cfg.ExperimentConfig,
                         finished: str, mixed_precision: Optional[str],
                         print_fn: Callable[[str], None]
                         ) -> cfg.ExperimentConfig:
  """The config of `--mode eval` for a finished `train_and_eval` job."""
  print_fn(f"the job is complete: {finished} is at step "
           f"{model_directory.checkpoint_step(finished)}; evaluating it "
           "(as --mode eval).")
  return _resolved_config(experiment_config, "eval", mixed_precision)


def _strategy(strategy: Union[str, tf.distribute.Strategy, None],
              tpu: Optional[str], created: Optional[str]
              ) -> tf.distribute.Strategy:
  """The strategy named (or given); one that cannot start (no TPU here)
  leaves none of the empty folders `created` for --model_dir behind."""
  if not (isinstance(strategy, str) or strategy is None):
    return strategy
  try:
    return strategies.make_strategy(
        strategy or strategies.DEFAULT_STRATEGY, tpu)
  except Exception:
    if created and not fileio.files_under(created):
      fileio.rmtree(created)
    raise


def _outermost_missing(path: str) -> Optional[str]:
  """The outermost folder of `path` that does not exist yet (None if it
  exists): what creating it creates."""
  missing = None
  while path and not fileio.exists(path):
    missing, path = path, fileio.dirname(path)
    if path == missing:
      break
  return missing


def records_error(config: cfg.ExperimentConfig, mode: str,
                  error: Exception) -> Exception:
  """The one line for records that failed to read mid-run, naming the shard:
  a corrupted one (`DataLossError`), or one of another shape (records
  replaced under the run: a parse error); else `error` itself."""
  corrupt = isinstance(error, tf.errors.DataLossError)
  # Synthetic data and an empty input_path match no shard.
  for field, data in experiments.data_sections(config, mode):
    if corrupt:
      culprit = pretraining_input_pipeline.unreadable_shard(data)
      if culprit:
        return pretraining_errors.CorruptRecordsError(
            f"{field}.input_path: record shard {culprit} is corrupted or "
            "truncated. Recreate the records (rembert-create-pretraining-data "
            "--overwrite) or copy the shard again, then run the same command: "
            "it resumes from the newest checkpoint.")
    else:
      other = pretraining_input_pipeline.shard_of_other_shape(data)
      if other:
        return pretraining_errors.PretrainingError(
            f"{field}.input_path: record shard {other}; the records changed "
            "under the run. Put back records of the experiment's shape, then "
            "run the same command: it resumes from the newest checkpoint.")
  if corrupt:
    return pretraining_errors.CorruptRecordsError(
        f"reading the records failed ({errors.one_line(error)}); a shard is "
        "corrupted or truncated. Recreate the records.")
  return error


def _resolved_config(experiment_config: cfg.ExperimentConfig, mode: str,
                     mixed_precision: Optional[str]) -> cfg.ExperimentConfig:
  """A copy of the config with the command's choices applied, checked."""
  if mode not in MODES:
    raise pretraining_errors.PretrainingError(
        f"--mode {mode!r}: expected one of {', '.join(MODES)}.")
  config = experiment_config.replace()  # never mutate the caller's config
  if mixed_precision is not None:
    config.runtime.mixed_precision_dtype = process_settings.model_garden_dtype(
        mixed_precision)
  # The task compiles forward+backward itself; Model Garden's GPU-only
  # whole-step jit would wrap the cross-replica all-reduce as well.
  config.runtime.enable_xla = False
  # Preemption saves are this runner's (SIGTERM flag, or TF's
  # PreemptionCheckpointHandler checked between steps on several workers).
  config.trainer.preemption_on_demand_checkpoint = False
  config.task.model.validate()
  experiments.check_trainer_config(config.trainer)
  return config


def _precision(config: cfg.ExperimentConfig) -> str:
  """The compute precision of the config's runtime.mixed_precision_dtype.

  Anything but bfloat16 computes in float32 (float16 is refused by the
  task's optimizer with its own message).
  """
  return ("mixed_bfloat16" if config.runtime.mixed_precision_dtype == "bfloat16"
          else "float32")


def _run(config: cfg.ExperimentConfig, model_dir: str, mode: str,
         strategy: tf.distribute.Strategy, allow_sentencepiece_mismatch: bool,
         print_fn: Callable[[str], None]) -> Dict[str, Any]:
  """The named steps of a run under `strategy`, after the first checks."""
  task, latest = _build_task(config, model_dir, mode, print_fn)
  trainer = training_loop.create_trainer(config, task, strategy, model_dir,
                                         mode)
  model_directory.check_checkpoint_compatible(model_dir, trainer,
                                              config.task.model)
  if latest is not None and "train" in mode:  # the records' tokenizer too
    model_directory.check_sentencepiece_matches(
        model_dir, config.task.train_data, allow_sentencepiece_mismatch,
        print_fn)
  experiments.check_async_checkpointing(
      config, strategies.is_multi_worker(strategy))
  is_chief = strategies.is_chief(strategy)
  if is_chief and mode != "continuous_eval":  # nothing written before this
    model_directory.prepare(config, model_dir, latest)
  writer = model_directory.ArtifactWriter(
      config, model_dir, trainer.model.encoder, is_chief)
  progress = orbit_loop.ProgressPrinter(
      trainer.global_step, config.trainer.train_steps, print_fn,
      accuracy_key="masked_lm_accuracy", accuracy_name="mlm_acc",
      steps_per_loop=config.trainer.steps_per_loop)
  evaluations = training_loop.EvalRecorder(trainer.global_step, print_fn)
  saves = training_loop.checkpoints(config, writer, model_dir, strategy)
  experiment = None
  try:
    # orbit's controller lines go to the log only: the console has ours.
    with preemption.sigterm_stop_flag() as stop_flag, \
         console.orbit_logs_to_file():
      train_actions = []
      if "train" in mode:  # in this order, before Model Garden's own
        train_actions = [
            training_loop.nonfinite_loss_guard(saves, writer, model_dir,
                                               trainer.global_step),
            progress, saves,
            *preemption.stop_actions(strategy, stop_flag,
                                     lambda: _final_save(saves, model_dir),
                                     trainer.global_step)]
      experiment = _build_experiment_runner(
          config, task, trainer, strategy, mode, model_dir, train_actions,
          evaluations)
      saves.attach(experiment.checkpoint_manager, trainer.global_step)
      if latest and "train" in mode:
        print_fn(f"resumed from {latest} at step "
                 f"{int(trainer.global_step.numpy())}")
      _run_experiment(experiment, strategy, model_dir)
      final = _final_save(saves, model_dir) if "train" in mode else None
    return _final_metrics(trainer, final, model_dir, progress, evaluations)
  finally:
    training_loop.finish_writes(saves, writer)
    writer.close()
    if experiment is not None and not is_chief:
      # Model Garden's runner saved this worker's copies in a temporary
      # directory of its own.
      fileio.rmtree(experiment.checkpoint_manager.directory)


def _final_save(saves: orbit_loop.Checkpoints, model_dir: str) -> str:
  """The last save (after the writes in flight, complete when it returns);
  its path in model_dir, also on a worker that saved a copy elsewhere."""
  return fileio.join(model_dir, fileio.basename(saves.save(final=True)))


def _run_experiment(experiment: train_lib.OrbitExperimentRunner,
                    strategy: tf.distribute.Strategy, model_dir: str) -> None:
  """Runs the experiment; a failed collective of a multi-worker job is
  reported as the lost peer it is."""
  try:
    experiment.run()
  except tf.errors.OpError as e:
    if not cluster_failures.is_lost_peer(e, strategy):
      raise
    raise cluster_failures.LostPeerError.from_error(
        e, strategy.cluster_resolver,
        tf.train.latest_checkpoint(model_dir)) from None


def _finished_run_metrics(config: cfg.ExperimentConfig, model_dir: str,
                          checkpoint: str, print_fn: Callable[[str], None]
                          ) -> Dict[str, Any]:
  step = model_directory.checkpoint_step(checkpoint)
  print_fn(f"the job is complete: {checkpoint} is at step {step} "
           f"(trainer.train_steps={config.trainer.train_steps}); nothing to "
           "do. Raise trainer.train_steps to train further.")
  return {"global_step": step, "model_dir": model_dir,
          "checkpoint": checkpoint}


def _build_task(config: cfg.ExperimentConfig, model_dir: str, mode: str,
                print_fn: Callable[[str], None]
                ) -> Tuple[base_task.Task, Optional[str]]:
  """The task, starting its data at the step of model_dir's newest intact
  checkpoint (returned too; None without one)."""
  latest = model_directory.resume_checkpoint(model_dir, mode, print_fn)
  task = task_factory.get_task(config.task, logging_dir=model_dir)
  if latest is not None:
    task.initial_train_step = model_directory.checkpoint_step(latest)
  return task, latest


def _build_experiment_runner(config, task, trainer, strategy, mode,
                             model_dir, train_actions, evaluations
                             ) -> train_lib.OrbitExperimentRunner:
  """Model Garden's OrbitExperimentRunner with orbit's Controller, its loops
  cut into device calls (`orbit_loop.LoopSteps`); the saves are the
  `orbit_loop.Checkpoints` action's, so the runner's checkpoint manager gets
  no interval of its own (orbit saves by itself only with one)."""
  params = config.replace(trainer={"checkpoint_interval": 0})
  steps = orbit_loop.LoopSteps(
      config.trainer.steps_per_loop, config.trainer.checkpoint_interval,
      stop_checks.StopCheckSchedule(
          seconds=config.trainer.stop_check_seconds,
          fixed_steps=config.trainer.stop_check_steps,
          agree=stop_checks.agree_across_workers(strategy)))
  try:
    return train_lib.OrbitExperimentRunner(
        distribution_strategy=strategy, task=task, mode=mode, params=params,
        model_dir=model_dir, trainer=trainer, train_actions=train_actions,
        eval_actions=[evaluations],
        controller_cls=orbit_loop.controller_with_steps(steps))
  except ValueError as e:  # orbit / Model Garden refusing a trainer setting
    raise pretraining_errors.PretrainingError(
        f"experiment config: {errors.one_line(e)}. Fix the named trainer.* "
        "field in --config_file or --params_override.") from None


def _final_metrics(trainer, final_checkpoint, model_dir, progress,
                   evaluations) -> Dict[str, Any]:
  metrics: Dict[str, Any] = {
      "global_step": int(trainer.global_step.numpy()),
      "model_dir": model_dir,
      "checkpoint": final_checkpoint or tf.train.latest_checkpoint(model_dir),
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
