r"""The ablation suite: pre-train every row, fine-tune each with the paper's
protocol, compare layers, and write the paper-style table and pictures.

Phases, each resumable through `completion` markers: data (`demo_data`),
pre-training of every row (`pretraining.runner.run`), fine-tuning sweeps
(`finetune_sweep`), layer similarity and the report (`report`), under
`output_dir`'s `data/`, `models/<row>/{pretrain,finetune/<task>,
layer_similarity}/`, `results.{json,md}` and `figures/`.

Example (the CI-sized demo suite):
<!-- snippet: not run: runs the whole ablation suite (tens of minutes on a CPU) -->
```python
from rembert_tf.ablation import suite
options = suite.SuiteOptions(output_dir="/tmp/suite", scale="demo",
                             models=["coupled", "decoupled"],
                             params_override="trainer.train_steps=20")
summary = suite.run_suite(options)
print(summary["markdown"])
```
"""
import dataclasses
import hashlib
import json
import time
from typing import Any, Callable, Dict, List, Optional

from rembert_tf.ablation import completion
from rembert_tf.ablation import finetune_sweep
from rembert_tf.ablation import report
from rembert_tf.ablation import rows as rows_lib
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.evaluation import layer_similarity
from rembert_tf.evaluation import xtreme_tasks
from rembert_tf.finetuning import task_types
from rembert_tf.modeling import parameter_count
from rembert_tf.modeling import rembert_config
from rembert_tf.pretraining import runner as pretraining_runner
from rembert_tf.runtime import experiment_files
from rembert_tf.runtime import strategies

# The six XTREME tasks the paper reports: the task table's entries with
# paper results.
ALL_TASKS = tuple(name for name, task in xtreme_tasks.XTREME_TASKS.items()
                  if task.paper_results)
SENTENCEPIECE_FILE = "sentencepiece.model"


@dataclasses.dataclass
class SuiteOptions:
  """What to run. Defaults per scale are filled in by `resolve_defaults`."""
  output_dir: str
  scale: str = "base"
  experiments: Optional[List[str]] = None    # base: experiment YAMLs
  models: Optional[List[str]] = None         # a subset of the rows, by name
  train_records: Optional[str] = None        # base: pre-training records glob
  eval_records: Optional[str] = None
  xtreme_data_dir: Optional[str] = None      # XTREME download/ folder, or
  xtreme_records_dir: Optional[str] = None   # rembert-create-finetuning-data output
  sp_model: Optional[str] = None             # for --data_dir fine-tuning
  tasks: Optional[List[str]] = None
  learning_rates: Optional[List[float]] = None
  num_seeds: Optional[int] = None
  # Fields of the fine-tuning experiment for every run: a dict (nested or
  # dotted) or "a.b=c" strings.
  finetune_overrides: Any = None
  params_override: Any = None                # applied to every row's experiment
  strategy: str = "one_device"
  tpu: Optional[str] = None
  mixed_precision: Optional[str] = None
  allow_different_schedules: bool = False
  similarity_sentences: Optional[str] = None  # text or TSV (first column)
  similarity_max_sentences: int = 256
  similarity_seq_length: Optional[int] = None
  corpus_megabytes: float = 3.0               # demo scale
  demo_train_pairs: Optional[int] = None      # demo / small: English pairs
  demo_dev_pairs: int = 300
  num_workers: int = 2                        # demo records: processes
  demo_languages: Optional[List[str]] = None  # demo task's languages (default all)


# The paper's protocol at demo size (CPU minutes): two rates, two seeds.
DEMO_DEFAULTS = dict(tasks=["xnli"], learning_rates=[3e-4, 1e-3], num_seeds=2,
                     finetune_overrides={"trainer.num_train_epochs": 2},
                     demo_train_pairs=2000)
# Small scale: rates and epochs chosen on the coupled and decoupled rows'
# English dev; three seeds for the comparisons.
SMALL_DEFAULTS = dict(tasks=["xnli"], learning_rates=[5e-4, 1e-3], num_seeds=3,
                      finetune_overrides={"trainer.num_train_epochs": 3},
                      demo_train_pairs=4000)
SCALE_DEFAULTS = {"demo": DEMO_DEFAULTS, "small": SMALL_DEFAULTS}
# Base scale: BERT-style fine-tuning rates, three seeds as in the paper.
BASE_DEFAULTS = dict(tasks=list(ALL_TASKS), learning_rates=[1e-5, 2e-5, 3e-5],
                     num_seeds=3, finetune_overrides={})


def resolve_defaults(options: SuiteOptions) -> SuiteOptions:
  if options.scale not in rows_lib.SCALES:
    raise errors.UsageError(f"--scale {options.scale!r}: expected one of "
                            f"{', '.join(rows_lib.SCALES)}.")
  defaults = SCALE_DEFAULTS.get(options.scale, BASE_DEFAULTS)
  values = {k: v if getattr(options, k) is None else getattr(options, k)
            for k, v in defaults.items()}
  unknown = [t for t in values["tasks"] if t not in ALL_TASKS]
  if unknown:
    raise errors.UsageError(f"--tasks {','.join(unknown)}: expected some of "
                            f"{', '.join(ALL_TASKS)}.")
  # Unusable fine-tuning overrides are refused now, not after pre-training.
  values["finetune_overrides"] = finetune_sweep.checked_overrides(
      values["finetune_overrides"])
  resolved = dataclasses.replace(options, **values)
  _check_numbers(resolved)
  return resolved


def _check_numbers(options: SuiteOptions) -> None:
  """The suite's numeric flags in range, before any row runs."""
  bad = []
  if options.num_seeds < 1:
    bad.append((f"--num_seeds {options.num_seeds}", "must be at least 1"))
  bad += [(f"--learning_rates {rate}", "a learning rate must be a positive "
           "number (e.g. 2e-5)") for rate in options.learning_rates
          if not rate > 0]
  if options.similarity_max_sentences < 1:
    bad.append((f"--similarity_max_sentences "
                f"{options.similarity_max_sentences}", "must be at least 1"))
  if not options.corpus_megabytes > 0:
    bad.append((f"--corpus_megabytes {options.corpus_megabytes}",
                "give a size above 0 (e.g. 3)"))
  if bad:
    raise errors.UsageError(f"{bad[0][0]}: {bad[0][1]}.")


class SuiteConsole:
  """Suite progress lines: what runs, what is skipped, elapsed time."""

  def __init__(self, print_fn: Callable[[str], None] = print):
    self.print_fn = print_fn
    self.started = time.time()

  def __call__(self, message: str) -> None:
    self.print_fn(message)

  def phase(self, title: str) -> None:
    minutes = (time.time() - self.started) / 60
    self.print_fn(f"\n=== [ablation] {title} ({minutes:.1f} min elapsed) ===")


# --- Phase 1: data -----------------------------------------------------------


def _prepare_data(options: SuiteOptions, rows, say) -> Dict[str, Optional[str]]:
  """Records, XTREME data and similarity sentences of the suite."""
  if options.scale in rows_lib.SCALE_EXPERIMENTS:
    from rembert_tf.ablation import demo_data  # pylint: disable=g-import-not-at-top
    probe = rows_lib.load_row_config(rows[0], experiment_files.parse_override(options.params_override))
    data = demo_data.prepare(
        fileio.join(options.output_dir, "data"),
        vocab_size=probe.task.model.vocab_size,
        seq_length=probe.task.train_data.seq_length,
        max_predictions_per_seq=probe.task.train_data.max_predictions_per_seq,
        corpus_megabytes=options.corpus_megabytes,
        num_train_pairs=options.demo_train_pairs,
        num_dev_pairs=options.demo_dev_pairs, languages=options.demo_languages,
        num_workers=options.num_workers,
        unmasked_train=probe.task.train_data.use_dynamic_masking, say=say)
    return dict(train_records=data["train_records"],
                eval_records=data["eval_records"],
                xtreme_data_dir=data["download_dir"], xtreme_records_dir=None,
                sp_model=data["sp_model"], seq_length=probe.task.train_data.seq_length,
                similarity_sentences=(options.similarity_sentences or
                                      data["similarity_sentences"]))
  if not options.train_records:
    raise errors.UsageError(
        "--train_records: give the pre-training records (a glob of the "
        "*.tfrecord files rembert-create-pretraining-data wrote), or use "
        "--scale demo.")
  if not (options.xtreme_data_dir or options.xtreme_records_dir):
    raise errors.UsageError(
        "give --xtreme_data_dir (the XTREME download/ folder) or "
        "--xtreme_records_dir (rembert-create-finetuning-data --output_dir).")
  sentences = options.similarity_sentences
  if sentences is None and options.xtreme_data_dir:
    candidate = fileio.join(options.xtreme_data_dir, "xnli", "dev-en.tsv")
    sentences = candidate if fileio.exists(candidate) else None
  return dict(train_records=options.train_records,
              eval_records=options.eval_records or options.train_records,
              xtreme_data_dir=options.xtreme_data_dir,
              xtreme_records_dir=options.xtreme_records_dir,
              sp_model=options.sp_model, seq_length=None,
              similarity_sentences=sentences)


def _row_override(options: SuiteOptions, data) -> Dict[str, Any]:
  override = experiment_files.parse_override(options.params_override)
  task = dict(override.get("task", {}))
  task["train_data"] = dict(task.get("train_data", {}),
                            input_path=data["train_records"])
  task["validation_data"] = dict(task.get("validation_data", {}),
                                 input_path=data["eval_records"])
  return dict(override, task=task)


# --- Phase 2: pre-training ------------------------------------------------------


def _fingerprint(config) -> str:
  text = json.dumps(config.as_dict(), sort_keys=True, default=str)
  return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def pretrain_row(row, config, model_dir: str, options: SuiteOptions, strategy,
                 say) -> Dict[str, Any]:
  """Pre-trains one row (or returns the stored figures of a finished run)."""
  if not row.pretrained:
    return _random_init_row(row, config, model_dir, say)
  fingerprint = _fingerprint(config)
  done = completion.read_complete(model_dir)
  if done is not None and done.get("fingerprint") == fingerprint:
    say(f"[ablation] skip pre-training {row.name}: finished earlier (step "
        f"{done['global_step']}, held-out MLM accuracy "
        f"{done['eval_masked_lm_accuracy']:.4f})")
    return done
  say(f"[ablation] pre-training {row.name} ({config.trainer.train_steps} steps)"
      f" -> {model_dir}")
  metrics = pretraining_runner.run(config, model_dir, mode="train_and_eval",
                                   strategy=strategy, tpu=options.tpu,
                                   mixed_precision=options.mixed_precision,
                                   print_fn=say)
  payload = dict(
      fingerprint=fingerprint, global_step=metrics["global_step"],
      eval_masked_lm_accuracy=float(metrics.get("eval_masked_lm_accuracy") or 0.0),
      eval_loss=float(metrics.get("eval_loss") or 0.0), **_model_facts(config))
  completion.mark_complete(model_dir, payload)
  _release_memory()
  return payload


def _model_facts(config) -> Dict[str, Any]:
  counts = parameter_count.count_parameters(config.task.model)
  return dict(model=config.task.model.as_dict(),
              counts=dict(pt_params=counts.pt_params, ft_params=counts.ft_params,
                          pooler_params=counts.pooler_params))


def _random_init_row(row, config, model_dir: str, say) -> Dict[str, Any]:
  """A row fine-tuned from random weights: only its model config is written."""
  say(f"[ablation] {row.name}: no pre-training (fine-tuned from random weights)")
  fileio.makedirs(model_dir)
  rembert_config.save_model_config(
      config.task.model, fileio.join(model_dir, checkpoint_layout.MODEL_CONFIG_FILE))
  return dict(global_step=0, eval_masked_lm_accuracy=None, **_model_facts(config))


def _release_memory() -> None:
  import tf_keras  # pylint: disable=g-import-not-at-top
  tf_keras.backend.clear_session()


# --- Phase 3: fine-tuning --------------------------------------------------------


class FinetuneData:
  """Data arguments of each fine-tuning run; records are built once per task and
  shared by every row."""

  def __init__(self, output_dir: str, data: Dict[str, Any]):
    self.data = data
    self.index_path = fileio.join(output_dir, "finetune_records.json")
    self.index = (fileio.read_json(self.index_path)
                  if fileio.exists(self.index_path) else {})

  def arguments(self, task: str) -> Dict[str, Any]:
    """The data fields of the next fine-tuning run of `task`."""
    if self.data["xtreme_records_dir"]:
      return {"data.records_dir": fileio.join(self.data["xtreme_records_dir"],
                                              task)}
    if task in self.index:
      return {"data.records_dir": self.index[task]}
    arguments = {"data.data_dir": self.data["xtreme_data_dir"]}
    if self.data["sp_model"]:
      arguments["data.sentencepiece_model"] = str(self.data["sp_model"])
    seq_length = self.data["seq_length"] or task_types.get(
        xtreme_tasks.get(task).task_type).default_seq_length
    return dict(arguments, **{"data.seq_length": seq_length})

  def after_run(self, task: str, run_dir: str) -> None:
    records = fileio.join(run_dir, "records", task)
    if task not in self.index and fileio.exists(fileio.join(records, "metadata.json")):
      self.index[task] = records
      fileio.write_json(self.index_path, self.index)


def finetune_row(row, model_dir: str, row_dir: str, options: SuiteOptions,
                 finetune_data: FinetuneData, progress, say) -> Dict[str, Dict]:
  sweeps = {}
  for task in options.tasks:
    def on_run_done(run_dir, skipped, task=task):
      finetune_data.after_run(task, run_dir)
      progress(skipped)
    # A random-initialisation row starts from its model config alone.
    start = (dict(init_checkpoint=model_dir) if row.pretrained else dict(
        init_checkpoint=None, model_config=fileio.join(
            model_dir, checkpoint_layout.MODEL_CONFIG_FILE)))
    sweeps[task] = finetune_sweep.run_sweep(
        task, fileio.join(row_dir, "finetune", task), **start,
        data=lambda task=task: finetune_data.arguments(task),
        learning_rates=options.learning_rates, num_seeds=options.num_seeds,
        overrides=options.finetune_overrides, say=say, on_run_done=on_run_done,
        keep_first_seed=task == options.tasks[0])
    _release_memory()
  return sweeps


# --- Phase 4: layer similarity ---------------------------------------------------


def read_sentences(path: str, limit: int) -> List[str]:
  """First `limit` non-empty lines (a TSV's first column)."""
  sentences = []
  for line in fileio.read_text(path).splitlines():
    text = line.split("\t")[0].strip()
    if text:
      sentences.append(text)
    if len(sentences) >= limit:
      break
  return sentences


def similarity_row(row, model_dir: str, row_dir: str, sweeps: Dict[str, Dict],
                   sentences: Optional[List[str]], options: SuiteOptions,
                   seq_length: int, say) -> Optional[List[float]]:
  """CKA of the pre-trained encoder against the first task's fine-tuned one."""
  if not sentences or not sweeps or not row.pretrained:
    return None
  task = next(iter(sweeps))
  finetuned = sweeps[task]["finetuned_checkpoints"][0]
  out_dir = fileio.join(row_dir, "layer_similarity")
  done = completion.read_complete(out_dir)
  if done is not None and done.get("finetuned") == finetuned:
    say(f"[ablation] skip layer similarity {row.name}: finished earlier")
    return done["diagonal"]
  sp_model = options.sp_model or fileio.join(model_dir, SENTENCEPIECE_FILE)
  result = layer_similarity.analyze_checkpoints(
      model_dir, finetuned, sentences, sp_model=sp_model, seq_length=seq_length,
      label_a=f"{row.name} pre-trained", label_b=f"{row.name} fine-tuned ({task})",
      output_dir=out_dir, overwrite=True,  # Not marked complete: redone.
      model_config=fileio.join(model_dir, "model_config.yaml"))
  completion.mark_complete(out_dir, dict(finetuned=finetuned,
                                         diagonal=result.diagonal))
  say(f"[ablation] layer similarity {row.name}: per-layer CKA "
      + " ".join(f"{v:.3f}" for v in result.diagonal))
  _release_memory()
  return result.diagonal


# --- The suite -------------------------------------------------------------------------


def suite_rows(options: SuiteOptions):
  rows = (rows_lib.scale_rows(options.scale)
          if options.scale in rows_lib.SCALE_EXPERIMENTS
          else rows_lib.base_rows(options.experiments))
  return rows_lib.select_rows(rows, options.models)


def _make_progress(total: int, say: SuiteConsole):
  state = dict(done=0, ran=0, seconds=0.0, last=time.time())

  def progress(skipped: bool):
    now = time.time()
    state["done"] += 1
    if not skipped:
      state["ran"] += 1
      state["seconds"] += now - state["last"]
    state["last"] = now
    left = total - state["done"]
    eta = (f"ETA {left * state['seconds'] / state['ran'] / 60:.1f} min"
           if state["ran"] else "ETA -")
    say(f"[ablation] fine-tuning runs {state['done']}/{total} | {eta}")
  return progress


def run_suite(options: SuiteOptions, print_fn: Callable[[str], None] = print
              ) -> Dict[str, Any]:
  """Runs (or resumes) the whole suite; returns the table, markdown, figures."""
  say = SuiteConsole(print_fn)
  options = resolve_defaults(options)
  rows = suite_rows(options)
  fileio.makedirs(options.output_dir)
  say.phase(f"{options.scale} scale: {len(rows)} models, tasks "
                f"{', '.join(options.tasks)}")
  data = _prepare_data(options, rows, say)
  override = _row_override(options, data)
  configs = {row.name: rows_lib.load_row_config(row, override) for row in rows}
  if not options.allow_different_schedules:
    rows_lib.check_same_schedule(configs)
  fileio.write_json(fileio.join(options.output_dir, "suite.json"),
                    dict(dataclasses.asdict(options), rows=[r.name for r in rows]))
  strategy = strategies.make_strategy(options.strategy, options.tpu)
  model_dirs = {row.name: fileio.join(options.output_dir, "models", row.name,
                                      "pretrain") for row in rows}

  say.phase("pre-training")
  pretrained = {row.name: pretrain_row(row, configs[row.name], model_dirs[row.name],
                                       options, strategy, say) for row in rows}

  say.phase("fine-tuning")
  finetune_data = FinetuneData(options.output_dir, data)
  total = len(rows) * len(options.tasks) * len(options.learning_rates) * options.num_seeds
  progress = _make_progress(total, say)
  sweeps = {row.name: finetune_row(
      row, model_dirs[row.name], fileio.join(options.output_dir, "models", row.name),
      options, finetune_data, progress, say) for row in rows}

  say.phase("layer similarity (pre-trained vs fine-tuned)")
  sentences = (read_sentences(data["similarity_sentences"],
                              options.similarity_max_sentences)
               if data["similarity_sentences"] else None)
  if not sentences:
    say("[ablation] no sentences for the layer similarity: pass "
            "--similarity_sentences FILE (one sentence per line); skipped")
  seq_length = (options.similarity_seq_length or data["seq_length"] or 128)
  row_results = []
  for row in rows:
    diagonal = similarity_row(
        row, model_dirs[row.name], fileio.join(options.output_dir, "models", row.name),
        sweeps[row.name], sentences, options, seq_length, say)
    done = pretrained[row.name]
    row_results.append(dict(
        name=row.name, model=done["model"], counts=done["counts"],
        mlm_accuracy=done["eval_masked_lm_accuracy"], sweeps=sweeps[row.name],
        similarity_diagonal=diagonal, paper_column=row.paper_column))

  say.phase("results")
  outputs = report.write_outputs(options.output_dir, row_results, model_dirs, say)
  minutes = (time.time() - say.started) / 60
  say(f"[ablation] done in {minutes:.1f} min: {options.output_dir}")
  return dict(outputs, rows=row_results, minutes=minutes)
