r"""The ablation suite: pre-train every row, fine-tune each with the paper's
protocol, compare layers, and write the paper-style table and pictures.

Phases, each resumable through `completion` markers: data (`demo_data` at
the CPU scales), pre-training of every row (`pretraining.runner.run`),
fine-tuning sweeps (`finetune_sweep`), layer similarity
(`evaluation.layer_similarity`) and the report (`report`), under
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
from typing import Any, Callable, Dict, List, Optional, Tuple

from rembert_tf.ablation import completion
from rembert_tf.ablation import finetune_sweep
from rembert_tf.ablation import report
from rembert_tf.ablation import rows as rows_lib
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.data import xtreme_records
from rembert_tf.evaluation import layer_similarity
from rembert_tf.evaluation import xtreme_tasks
from rembert_tf.modeling import parameter_count
from rembert_tf.modeling import rembert_config
from rembert_tf.pretraining import runner as pretraining_runner
from rembert_tf.runtime import experiment_files

# The six XTREME tasks the paper reports: the task table's entries with
# paper results.
ALL_TASKS = tuple(name for name, task in xtreme_tasks.XTREME_TASKS.items()
                  if task.paper_results)


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
  sentencepiece_model: Optional[str] = None  # for xtreme_data_dir
  tasks: Optional[List[str]] = None
  learning_rates: Optional[List[float]] = None
  num_seeds: Optional[int] = None
  # Fields of the fine-tuning experiment for every run: a dict (nested or
  # dotted) or "a.b=c" strings.
  finetune_params_override: Any = None
  params_override: Any = None                # applied to every row's experiment
  strategy: str = "one_device"
  tpu: Optional[str] = None
  mixed_precision: Optional[str] = None
  allow_different_schedules: bool = False
  similarity_sentences: Optional[str] = None  # text or TSV (first column)
  similarity_max_sentences: int = 256
  corpus_megabytes: float = 3.0               # demo scale
  demo_train_pairs: Optional[int] = None      # demo / small: English pairs
  demo_dev_pairs: int = 300
  num_workers: int = 2                        # demo records: processes
  demo_languages: Optional[List[str]] = None  # demo task's languages (default all)


# The paper's protocol at demo size (CPU minutes): two rates, two seeds.
DEMO_DEFAULTS = dict(tasks=["xnli"], learning_rates=[3e-4, 1e-3], num_seeds=2,
                     finetune_params_override={"trainer.num_train_epochs": 2},
                     demo_train_pairs=2000)
# Small scale: rates and epochs chosen on the coupled and decoupled rows'
# English dev; three seeds for the comparisons.
SMALL_DEFAULTS = dict(tasks=["xnli"], learning_rates=[5e-4, 1e-3], num_seeds=3,
                      finetune_params_override={"trainer.num_train_epochs": 3},
                      demo_train_pairs=4000)
# Base scale: BERT-style fine-tuning rates, three seeds as in the paper.
BASE_DEFAULTS = dict(tasks=list(ALL_TASKS), learning_rates=[1e-5, 2e-5, 3e-5],
                     num_seeds=3, finetune_params_override={})
SCALE_DEFAULTS = {"demo": DEMO_DEFAULTS, "small": SMALL_DEFAULTS,
                  "base": BASE_DEFAULTS}


def resolve_defaults(options: SuiteOptions) -> SuiteOptions:
  """The options with their scale's defaults, checked before any row runs."""
  if options.scale not in SCALE_DEFAULTS:
    raise errors.UsageError(f"--scale {options.scale!r}: expected one of "
                            f"{', '.join(SCALE_DEFAULTS)}.")
  values = {k: v if getattr(options, k) is None else getattr(options, k)
            for k, v in SCALE_DEFAULTS[options.scale].items()}
  unknown = [t for t in values["tasks"] if t not in ALL_TASKS]
  if unknown:
    raise errors.UsageError(f"--tasks {','.join(unknown)}: expected some of "
                            f"{', '.join(ALL_TASKS)}.")
  values["finetune_params_override"] = finetune_sweep.checked_overrides(
      values["finetune_params_override"])
  resolved = dataclasses.replace(options, **values)
  for flag, value, ok, rule in (
      ("--num_seeds", resolved.num_seeds, resolved.num_seeds >= 1,
       "must be at least 1"),
      *[("--learning_rates", rate, rate > 0, "a learning rate must be a "
         "positive number (e.g. 2e-5)") for rate in resolved.learning_rates],
      ("--similarity_max_sentences", resolved.similarity_max_sentences,
       resolved.similarity_max_sentences >= 1, "must be at least 1"),
      ("--corpus_megabytes", resolved.corpus_megabytes,
       resolved.corpus_megabytes > 0, "give a size above 0 (e.g. 3)")):
    if not ok:
      raise errors.UsageError(f"{flag} {value}: {rule}.")
  return resolved


# --- Phase 1: data ------------------------------------------------------------


def _prepare_data(options: SuiteOptions, probe, say) -> Dict[str, Any]:
  """Records, XTREME data and similarity sentences of the suite; `probe`:
  the first row's experiment (the CPU scales' records follow it)."""
  if options.scale in rows_lib.SCALE_EXPERIMENTS:
    from rembert_tf.ablation import demo_data  # pylint: disable=g-import-not-at-top
    data = demo_data.prepare(fileio.join(options.output_dir, "data"), probe,
                             options, say)
    return dict(data, xtreme_records_dir=None,
                seq_length=probe.task.train_data.seq_length)
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
              sentencepiece_model=options.sentencepiece_model, seq_length=None,
              similarity_sentences=sentences)


def _row_configs(options: SuiteOptions, rows, say
                 ) -> Tuple[Dict[str, Any], Dict[str, Any]]:
  """Each row's experiment on the suite's records, and the records' paths."""
  override = experiment_files.parse_override(options.params_override)
  data = _prepare_data(options, rows_lib.load_row_config(rows[0], override),
                       say)
  task = dict(override.get("task", {}))
  task["train_data"] = dict(task.get("train_data", {}),
                            input_path=data["train_records"])
  task["validation_data"] = dict(task.get("validation_data", {}),
                                 input_path=data["eval_records"])
  override = dict(override, task=task)
  configs = {row.name: rows_lib.load_row_config(row, override) for row in rows}
  if not options.allow_different_schedules:
    rows_lib.check_same_schedule(configs)
  return configs, data


# --- Phase 2: pre-training ----------------------------------------------------


def pretrain_row(row, config, model_dir: str, options: SuiteOptions,
                 say) -> Dict[str, Any]:
  """Pre-trains one row (or returns the stored figures of a finished run)."""
  counts = parameter_count.count_parameters(config.task.model)
  facts = dict(model=config.task.model.as_dict(),
               counts=dict(pt_params=counts.pt_params, ft_params=counts.ft_params,
                           pooler_params=counts.pooler_params))
  if not row.pretrained:
    say(f"[ablation] {row.name}: no pre-training (fine-tuned from random "
        "weights)")
    fileio.makedirs(model_dir)
    rembert_config.save_model_config(config.task.model, fileio.join(
        model_dir, checkpoint_layout.MODEL_CONFIG_FILE))
    return dict(global_step=0, eval_masked_lm_accuracy=None, **facts)
  fingerprint = hashlib.sha256(json.dumps(
      config.as_dict(), sort_keys=True, default=str).encode()).hexdigest()[:16]
  done = completion.read_complete(model_dir)
  if done is not None and done.get("fingerprint") == fingerprint:
    say(f"[ablation] skip pre-training {row.name}: finished earlier (step "
        f"{done['global_step']}, held-out MLM accuracy "
        f"{done['eval_masked_lm_accuracy']:.4f})")
    return done
  say(f"[ablation] pre-training {row.name} ({config.trainer.train_steps} steps)"
      f" -> {model_dir}")
  metrics = pretraining_runner.run(config, model_dir, mode="train_and_eval",
                                   strategy=options.strategy, tpu=options.tpu,
                                   mixed_precision=options.mixed_precision,
                                   print_fn=say)
  payload = dict(
      fingerprint=fingerprint, global_step=metrics["global_step"],
      eval_masked_lm_accuracy=float(metrics.get("eval_masked_lm_accuracy") or 0.0),
      eval_loss=float(metrics.get("eval_loss") or 0.0), **facts)
  completion.mark_complete(model_dir, payload)
  _release_memory()
  return payload


def _release_memory() -> None:
  import tf_keras  # pylint: disable=g-import-not-at-top
  tf_keras.backend.clear_session()


# --- Phase 3: fine-tuning -----------------------------------------------------


def finetune_row(row, model_dir: str, row_dir: str, options: SuiteOptions,
                 data: Dict[str, Any], records: Dict[str, str],
                 say) -> Dict[str, Dict]:
  """The row's sweep on each task; `records` (task -> records directory) is
  filled by the first sweep of each task and read by the others."""
  if row.pretrained:
    encoder = {"encoder.init_checkpoint": model_dir}
  else:  # A random-initialisation row starts from its model config alone.
    encoder = {"encoder.model_config": fileio.join(
        model_dir, checkpoint_layout.MODEL_CONFIG_FILE)}
  sweeps = {}
  for task in options.tasks:
    if data["xtreme_records_dir"]:
      fields = {"data.records_dir": fileio.join(data["xtreme_records_dir"], task)}
    elif task in records:
      fields = {"data.records_dir": records[task]}
    else:
      fields = {"data.data_dir": data["xtreme_data_dir"],
                "data.sentencepiece_model": data["sentencepiece_model"],
                "data.seq_length": data["seq_length"] or xtreme_records.record_type(
                    xtreme_tasks.get(task).task_type).default_seq_length}
    sweeps[task] = finetune_sweep.run_sweep(
        task, fileio.join(row_dir, "finetune", task), encoder, fields,
        options.learning_rates, options.num_seeds, options.finetune_params_override,
        keep_first_seed=task == options.tasks[0], say=say)
    records.setdefault(task, sweeps[task]["records_dir"])
    _release_memory()
  return sweeps


# --- Phase 4: layer similarity ------------------------------------------------


def read_sentences(path: str, limit: int) -> List[str]:
  """First `limit` non-empty lines (a TSV's first column)."""
  lines = [l.split("\t")[0].strip() for l in fileio.read_text(path).splitlines()]
  return [line for line in lines if line][:limit]


def similarity_row(row, model_dir: str, row_dir: str, sweeps: Dict[str, Dict],
                   sentences: Optional[List[str]], options: SuiteOptions,
                   seq_length: int, say) -> Optional[List[float]]:
  """CKA of the pre-trained encoder against the first task's fine-tuned one."""
  if not sentences or not sweeps or not row.pretrained:
    return None
  task = next(iter(sweeps))
  finetuned = sweeps[task]["finetuned_checkpoint"]
  out_dir = fileio.join(row_dir, "layer_similarity")
  done = completion.read_complete(out_dir)
  if done is not None and done.get("finetuned") == finetuned:
    say(f"[ablation] skip layer similarity {row.name}: finished earlier")
    return done["diagonal"]
  result = layer_similarity.analyze_checkpoints(
      model_dir, finetuned, sentences, sp_model=options.sentencepiece_model,
      seq_length=seq_length, label_a=f"{row.name} pre-trained",
      label_b=f"{row.name} fine-tuned ({task})",
      output_dir=out_dir, overwrite=True)  # Not marked complete: redone.
  completion.mark_complete(out_dir, dict(finetuned=finetuned,
                                         diagonal=result.diagonal))
  say(f"[ablation] layer similarity {row.name}: per-layer CKA "
      + " ".join(f"{v:.3f}" for v in result.diagonal))
  _release_memory()
  return result.diagonal


# --- The suite ----------------------------------------------------------------


def run_suite(options: SuiteOptions, print_fn: Callable[[str], None] = print
              ) -> Dict[str, Any]:
  """Runs (or resumes) the whole suite; returns the table, markdown, figures."""
  started = time.time()

  def phase(title: str) -> None:
    minutes = (time.time() - started) / 60
    print_fn(f"\n=== [ablation] {title} ({minutes:.1f} min elapsed) ===")

  options = resolve_defaults(options)
  rows = rows_lib.select_rows(
      rows_lib.scale_rows(options.scale)
      if options.scale in rows_lib.SCALE_EXPERIMENTS
      else rows_lib.base_rows(options.experiments), options.models)
  fileio.makedirs(options.output_dir)
  phase(f"{options.scale} scale: {len(rows)} models, tasks "
        f"{', '.join(options.tasks)}")
  configs, data = _row_configs(options, rows, print_fn)
  fileio.write_json(fileio.join(options.output_dir, "suite.json"),
                    dict(dataclasses.asdict(options), rows=[r.name for r in rows]))
  row_dirs = {row.name: fileio.join(options.output_dir, "models", row.name)
              for row in rows}
  model_dirs = {name: fileio.join(row_dir, "pretrain")
                for name, row_dir in row_dirs.items()}
  phase("pre-training")
  pretrained = {row.name: pretrain_row(row, configs[row.name], model_dirs[row.name],
                                       options, print_fn) for row in rows}
  phase("fine-tuning")
  records = {}
  sweeps = {row.name: finetune_row(row, model_dirs[row.name], row_dirs[row.name],
                                   options, data, records, print_fn)
            for row in rows}
  phase("layer similarity (pre-trained vs fine-tuned)")
  sentences = (read_sentences(data["similarity_sentences"],
                              options.similarity_max_sentences)
               if data["similarity_sentences"] else None)
  if not sentences:
    print_fn("[ablation] no sentences for the layer similarity: pass "
             "--similarity_sentences FILE (one sentence per line); skipped")
  row_results = []
  for row in rows:
    done = pretrained[row.name]
    row_results.append(dict(
        name=row.name, model=done["model"], counts=done["counts"],
        mlm_accuracy=done["eval_masked_lm_accuracy"], sweeps=sweeps[row.name],
        paper_column=row.paper_column, similarity_diagonal=similarity_row(
            row, model_dirs[row.name], row_dirs[row.name], sweeps[row.name],
            sentences, options, data["seq_length"] or 128, print_fn)))
  phase("results")
  outputs = report.write_outputs(options.output_dir, row_results, model_dirs,
                                 print_fn)
  minutes = (time.time() - started) / 60
  print_fn(f"[ablation] done in {minutes:.1f} min: {options.output_dir}")
  return dict(outputs, rows=row_results, minutes=minutes)
