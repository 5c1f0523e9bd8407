"""XTREME fine-tuning: records, task types, the Model Garden task, the sweep.

Data (XTREME `download/` or TFDS -> TFRecords):
* `evaluation.xtreme_tasks` (below this package, for the scorer reads it
  too): one entry per XTREME task: where its files lie in the download
  folder, which TFDS splits and features hold it, its labels, task type and
  scored split;
* `xtreme_readers`: the TSV / JSON readers of those files;
* `xtreme_tfds`: a task's splits read from prepared TFDS datasets;
* `task_sources`: the download and TFDS sources of record creation;
* `example_records`: examples -> records (and the side rows that map
  predictions back), with the SentencePiece tokenizer;
* `task_types`: the registry of task types (reader, records, head, loss,
  metrics, record spec, prediction writer), the one place that differs per type;
* `finetuning_data`: `create_finetuning_data`, the records of one task.

Training and evaluation:
* `finetuning_task`: the Model Garden `base_task.Task` that orbit runs;
* `finetuning_experiment`: the registered experiment `rembert_finetuning`
  (data, encoder, sweep, trainer, runtime), the sweep as overrides, and each
  run's Model Garden experiment config;
* `training_loop`: one run on the orbit loop (resume, SIGTERM);
* `predictions`: predictions in the benchmark layout, and their scores;
* `sweep`: learning rates x seeds, skip / resume, selection on English dev,
  mean / std over seeds (also the ablation suite's protocol);
* `run_inputs`: the records and the encoder a run starts from;
* `finetuning_runner`: `run_finetuning`, the whole command as named steps.

Entry points:
```python
from rembert_tf.finetuning import finetuning_data
finetuning_data.create_finetuning_data("xnli", "download", "sp.model", "records")
from rembert_tf.finetuning import finetuning_experiment
config = finetuning_experiment.load_finetuning_config(["xtreme_xnli"], {
    "data.records_dir": "records/xnli", "encoder.init_checkpoint": "pretrain_dir"})
from rembert_tf.finetuning import finetuning_runner
results = finetuning_runner.run_finetuning(config, "ft/xnli")
```
"""

