"""Every numeric flag of every command at 0, negative and the wrong type.

One table: (command module, flag=value, exit code, the line's text). A value
out of range is one line and exit 1; a value of the wrong type is a usage
error of flag parsing, one line and exit 2. absl refuses them while parsing,
before `main` runs, so each command's cases share one process
(`testlib.run_command_cases`) and none starts TensorFlow work.
"""
import collections

import pytest
from absl import flags

import testlib
from rembert_tf.common import command

SP = "rembert_tf.cli.train_sentencepiece"
PRE = "rembert_tf.cli.create_pretraining_data"
FTD = "rembert_tf.cli.create_finetuning_data"
CORPUS = "rembert_tf.cli.make_demo_corpus"
DEMO = "rembert_tf.demo.__main__"
FT = "rembert_tf.cli.finetune"
RET = "rembert_tf.cli.retrieve"

AT_LEAST_1 = "must be at least 1."
RANGE_0_1 = "must be in [0, 1]."
# (module, flag, value, exit code, the line after `PROG: error: `)
SWEEP = [
    (SP, "vocab_size", "0", 1, "--vocab_size 0: " + AT_LEAST_1),
    (SP, "vocab_size", "abc", 2, "--vocab_size abc: not an integer; give an "
     "integer at least 1."),
    (SP, "sample_size", "-5", 1, "--sample_size -5: " + AT_LEAST_1),
    (SP, "sample_size", "1.5", 2, "--sample_size 1.5: not an integer; give an "
     "integer at least 1."),
    (SP, "character_coverage", "0", 1, "--character_coverage 0.0: must be "
     "above 0."),
    (SP, "character_coverage", "1.5", 1, "--character_coverage 1.5: must be "
     "at most 1."),
    (SP, "character_coverage", "all", 2, "--character_coverage all: not a "
     "number; give a number at most 1."),
    (SP, "num_threads", "0", 1, "--num_threads 0: " + AT_LEAST_1),
    (SP, "seed", "-1", 1, "--seed -1: must be at least 0."),
    (SP, "alpha", "-0.5", 1, "--alpha -0.5: must be at least 0."),
    (SP, "alpha", "x", 2, "--alpha x: not a number; give a number at least 0."),
    (PRE, "seq_length", "0", 1, "--seq_length 0: must be at least 3."),
    (PRE, "seq_length", "abc", 2, "--seq_length abc: not an integer; give an "
     "integer at least 3."),
    (PRE, "max_predictions_per_seq", "0", 1,
     "--max_predictions_per_seq 0: " + AT_LEAST_1),
    (PRE, "masked_lm_prob", "2", 1, "--masked_lm_prob 2: must be at most 1."),
    (PRE, "mask_token_rate", "-0.1", 1, "--mask_token_rate -0.1: " + RANGE_0_1),
    (PRE, "random_token_rate", "2", 1, "--random_token_rate 2: " + RANGE_0_1),
    (PRE, "dupe_factor", "0", 1, "--dupe_factor 0: " + AT_LEAST_1),
    (PRE, "short_seq_prob", "-1", 1, "--short_seq_prob -1: " + RANGE_0_1),
    (PRE, "num_output_shards", "0", 1, "--num_output_shards 0: must be in "
     "[1, 100000]."),
    (PRE, "num_workers", "-2", 1, "--num_workers -2: " + AT_LEAST_1),
    (PRE, "seed", "-1", 1, "--seed -1: must be at least 0."),
    (PRE, "alpha", "-1", 1, "--alpha -1: must be at least 0."),
    (FTD, "seq_length", "0", 1, "--seq_length 0: must be at least 8."),
    (FTD, "doc_stride", "0", 1, "--doc_stride 0: " + AT_LEAST_1),
    (FTD, "max_query_length", "-1", 1, "--max_query_length -1: " + AT_LEAST_1),
    (FTD, "max_query_length", "ten", 2, "--max_query_length ten: not an "
     "integer; give an integer at least 1."),
    (CORPUS, "megabytes", "0", 1, "--megabytes 0.0: give a size above 0 "
     "(e.g. --megabytes 2)."),
    (CORPUS, "megabytes", "-1", 1, "--megabytes -1.0: give a size above 0 "
     "(e.g. --megabytes 2)."),
    (CORPUS, "megabytes", "big", 2, "--megabytes big: not a number; give a "
     "number."),
    (CORPUS, "files_per_language", "0", 1, "--files_per_language 0: " +
     AT_LEAST_1),
    (CORPUS, "seed", "-3", 1, "--seed -3: must be at least 0."),
    (CORPUS, "parallel_fraction", "1.5", 1, "--parallel_fraction 1.5: " +
     RANGE_0_1),
    (CORPUS, "code_switched_fraction", "-0.5", 1,
     "--code_switched_fraction -0.5: " + RANGE_0_1),
    (DEMO, "seed", "-1", 1, "--seed -1: must be at least 0."),
    (DEMO, "train_steps", "0", 1, "--train_steps 0: " + AT_LEAST_1),
    (DEMO, "corpus_megabytes", "0", 1, "--corpus_megabytes 0.0: give a size "
     "above 0 (e.g. --corpus_megabytes 3)."),
    (DEMO, "num_workers", "0", 1, "--num_workers 0: " + AT_LEAST_1),
    (FT, "seq_length", "0", 1, "--seq_length 0: must be at least 8."),
    (FT, "learning_rate", "-1", 1, "--learning_rate -1.0: a learning rate "
     "must be a positive number (e.g. 2e-5)."),
    (FT, "learning_rate", "0", 1, "--learning_rate 0.0: a learning rate must "
     "be a positive number (e.g. 2e-5)."),
    (FT, "learning_rate", "fast", 2, "--learning_rate fast: not a number; "
     "give a number."),
    (FT, "num_seeds", "0", 1, "--num_seeds 0: " + AT_LEAST_1),
    (FT, "num_train_epochs", "0", 1, "--num_train_epochs 0.0: must be above "
     "0."),
    (FT, "num_train_steps", "0", 1, "--num_train_steps 0: train at least 1 "
     "step, or leave it out to train --num_train_epochs epochs."),
    (FT, "warmup_proportion", "1.5", 1, "--warmup_proportion 1.5: " +
     RANGE_0_1),
    (FT, "train_batch_size", "0", 1, "--train_batch_size 0: " + AT_LEAST_1),
    (FT, "train_batch_size", "8.5", 2, "--train_batch_size 8.5: not an "
     "integer; give an integer at least 1."),
    (FT, "eval_batch_size", "-8", 1, "--eval_batch_size -8: " + AT_LEAST_1),
    (FT, "steps_per_loop", "0", 1, "--steps_per_loop 0: " + AT_LEAST_1),
    (FT, "checkpoint_interval", "0", 1, "--checkpoint_interval 0: " +
     AT_LEAST_1),
    (FT, "seed", "-1", 1, "--seed -1: must be at least 0."),
    (RET, "seq_length", "0", 1, "--seq_length 0: must be at least 3."),
    (RET, "seq_length", "-1", 1, "--seq_length -1: must be at least 3."),
    (RET, "batch_size", "0", 1, "--batch_size 0: " + AT_LEAST_1),
    (RET, "layer", "0", 1, "--layer 0: blocks count from 1 (-1: the last); "
     "give 1..depth or -1."),
    (RET, "layer", "-2", 1, "--layer -2: must be at least -1."),
    (RET, "layer", "last", 2, "--layer last: not an integer; give an integer "
     "at least -1."),
]
PROGRAMS = {SP: "rembert-train-sentencepiece",
            PRE: "rembert-create-pretraining-data",
            FTD: "rembert-create-finetuning-data",
            CORPUS: "rembert-make-demo-corpus", DEMO: "rembert-demo",
            FT: "rembert-finetune", RET: "rembert-retrieve"}


@pytest.fixture(scope="module")
def results():
  """{(module, flag, value): result}, one process per command."""
  by_module = collections.defaultdict(list)
  for module, flag, value, _, _ in SWEEP:
    by_module[module].append((flag, value))
  found = {}
  for module, cases in by_module.items():
    argvs = [[f"--{flag}={value}"] for flag, value in cases]
    for (flag, value), result in zip(
        cases, testlib.run_command_cases(module, argvs)):
      found[(module, flag, value)] = result
  return found


@pytest.mark.parametrize(
    "module, flag, value, code, line", SWEEP,
    ids=[f"{m.split('.')[-1]}-{f}={v}" for m, f, v, _, _ in SWEEP])
def test_a_refused_numeric_flag_is_one_line(results, module, flag, value,
                                            code, line):
  result = results[(module, flag, value)]
  prog = PROGRAMS[module]
  assert result["code"] == code, result
  assert "Traceback" not in result["stderr"], result["stderr"]
  assert result["stderr"].strip().splitlines() == [f"{prog}: error: {line}"]


def test_an_unknown_flag_is_a_usage_error():
  unknown, = testlib.run_command_cases(CORPUS, [["--output_dir=x",
                                                 "--megabites=2"]])
  assert unknown["code"] == 2
  assert unknown["stderr"].strip() == ("rembert-make-demo-corpus: error: "
                                       "Unknown command line flag 'megabites'. "
                                       "Did you mean: megabytes ? (see "
                                       "rembert-make-demo-corpus --help)")


def test_a_missing_required_flag_is_a_usage_error():
  flag_values = flags.FlagValues()
  flags.DEFINE_string("output_dir", None, "Where.", flag_values=flag_values)
  flags.mark_flag_as_required("output_dir", flag_values=flag_values)
  with pytest.raises(flags.Error) as e:
    flag_values(["prog"])
  assert command.explain(e.value, "prog", flag_values) == (
      2, "--output_dir is required (see prog --help)")
