r"""Prints #PT / #FT parameter counts of model configs, in closed form.

#PT is everything trained in pre-training (encoder, pooler, output side);
#FT is what fine-tuning keeps, counted as the paper does: the encoder's
embeddings and Transformer blocks (its pooler is the `pooler` column). The
counts come from the config's sizes (`parameter_count.closed_form_counts`),
so no model is built. #PT / #FT are whole millions from 100M up (the paper's
rounding), three significant digits below; the last two columns are exact.

Usage:
  rembert-param-table tiny rembert coupled_768
  rembert-param-table configs/models/*.yaml --json
"""
import json
import os

from rembert_tf.common import command  # noqa: E402
command.quiet_tensorflow_import()  # before `main` imports TensorFlow
from rembert_tf.common import command_names  # noqa: E402
from rembert_tf.common import errors  # noqa: E402
from absl import flags  # noqa: E402

PROG = command_names.console_script(__spec__.name)  # rembert-param-table
FLAGS = flags.FLAGS
flags.DEFINE_bool("json", False, "Print a JSON list of "
                  "{config, pt_params, ft_params} instead of a table.")


@errors.command(PROG)
def main(argv):
  # TensorFlow and Model Garden load here, not when the flags are defined.
  from rembert_tf.modeling import parameter_count  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import rembert_config  # pylint: disable=g-import-not-at-top
  if len(argv) < 2:
    raise errors.UsageError(
        "give one or more model configs: preset names "
        f"({', '.join(rembert_config.available_presets())}) or YAML paths "
        f"(e.g. {PROG} tiny rembert).")
  rows = []
  for name in argv[1:]:
    cfg = rembert_config.load_model_config(name)
    rows.append((os.path.splitext(os.path.basename(name))[0], cfg,
                 parameter_count.closed_form_counts(cfg)))
  if FLAGS.json:
    print(json.dumps([dict(config=label, pt_params=c.pt_params,
                           ft_params=c.ft_params) for label, _, c in rows]))
    return
  print("| config | E_in | E_out | layers | coupled | #PT | #FT | pooler | "
        "pt_params | ft_params |\n"
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
  for label, cfg, c in rows:
    print(f"| {label} | {cfg.input_embedding_size} | "
          f"{cfg.output_embedding_size} | {cfg.num_hidden_layers}+"
          f"{cfg.num_output_layers} | {cfg.coupled} | "
          f"{parameter_count.millions(c.pt_params)} | "
          f"{parameter_count.millions(c.ft_params)} | {c.pooler_params:,} | "
          f"{c.pt_params:,} | {c.ft_params:,} |")


def run():
  command.run(main, __doc__, PROG)


if __name__ == "__main__":
  run()
