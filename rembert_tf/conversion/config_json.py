"""The JSON model config of the released TF1 checkpoint and of Hugging Face RemBERT.

Both use `RemBertConfig`'s field names, so reading is a validated copy; like
transformers' own configs, other keys are ignored.
"""
import json
from typing import Any, Dict, Optional

from rembert_tf.common import fileio
from rembert_tf.data import tokenizer
from rembert_tf.modeling import rembert_config

from rembert_tf.conversion import weight_layout

# The fields a config must give (the others default as transformers'
# RemBertConfig and the release do).
REQUIRED_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers",
                 "num_attention_heads", "intermediate_size",
                 "input_embedding_size", "max_position_embeddings",
                 "type_vocab_size")
# Back to Hugging Face's spellings: the first that maps.
_ACT_TO_HF = {ours: theirs for theirs, ours
              in reversed(weight_layout.HF_ACTIVATIONS.items())}


def model_config_from_json_dict(values: Dict[str, Any], source: str,
                                output_embedding_size: Optional[int] = None
                                ) -> rembert_config.RemBertConfig:
  """Validated RemBertConfig from HF/TF1 JSON keys; one error lists every problem."""
  if not isinstance(values, dict):
    raise weight_layout.ConversionError(f"{source}: expected a JSON object.")
  problems = []
  model_type = values.get("model_type")
  if model_type not in (None, "rembert"):
    problems.append(f"model_type is {model_type!r}, expected 'rembert'")
  missing = [k for k in REQUIRED_KEYS if k not in values]
  if missing:
    problems.append("missing key(s) " + ", ".join(missing))
  out = {k: v for k, v in values.items()
         if k in rembert_config.field_names()}
  act = out.get("hidden_act", "gelu")
  out["hidden_act"] = weight_layout.HF_ACTIVATIONS.get(act, act)
  if out["hidden_act"] not in rembert_config.SUPPORTED_ACTIVATIONS:
    known = [*rembert_config.SUPPORTED_ACTIVATIONS,
             *weight_layout.HF_ACTIVATIONS]
    problems.append(f"hidden_act {act!r} is not supported (expected one of "
                    f"{', '.join(known)})")
  if "output_embedding_size" not in out:
    # An encoder-only config: E_out only matters with an output side.
    out["output_embedding_size"] = (output_embedding_size
                                    or out.get("input_embedding_size", 1))
  if problems:
    raise weight_layout.ConversionError(
        f"{source}: " + "; ".join(problems) +
        ". Give the config.json that came with the checkpoint.")
  for key in ("hidden_dropout_prob", "attention_probs_dropout_prob",
              "layer_norm_eps", "initializer_range"):
    if key in out:
      out[key] = float(out[key])
  try:
    return rembert_config.model_config_from_dict(out, source=source)
  except rembert_config.ConfigError as e:
    raise weight_layout.ConversionError(str(e)) from None


def read_json_config(path, output_embedding_size: Optional[int] = None
                     ) -> rembert_config.RemBertConfig:
  path = fileio.as_str(path)
  if not fileio.isfile(path):
    raise weight_layout.ConversionError(
        f"{path}: config file not found. Pass the JSON config of the "
        "checkpoint with --config (the released RemBERT ships one).")
  try:
    values = json.loads(fileio.read_text(path))
  except (UnicodeDecodeError, json.JSONDecodeError) as e:
    raise weight_layout.ConversionError(
        f"{path}: not valid JSON ({' '.join(str(e).split())[:200]}); pass the "
        "config.json that came with the checkpoint.") from None
  return model_config_from_json_dict(values, path, output_embedding_size)


def write_hf_config(cfg, path, with_output_side: bool,
                    special: Optional[tokenizer.SpecialTokens] = None):
  """Writes the `config.json` of a Hugging Face RemBERT (with the special
  tokens' ids when given)."""
  values = {
      "architectures": ["RemBertForMaskedLM" if with_output_side
                        else "RemBertModel"],
      "model_type": "rembert",
  }
  for key in ("vocab_size", "hidden_size", "num_hidden_layers",
              "num_attention_heads", "intermediate_size",
              "input_embedding_size", "output_embedding_size",
              "max_position_embeddings", "type_vocab_size", "layer_norm_eps",
              "initializer_range", "hidden_dropout_prob",
              "attention_probs_dropout_prob"):
    values[key] = getattr(cfg, key)
  values["hidden_act"] = _ACT_TO_HF.get(cfg.hidden_act, cfg.hidden_act)
  values["tie_word_embeddings"] = False
  if special is not None:
    values.update(pad_token_id=special.pad_id, bos_token_id=special.cls_id,
                  eos_token_id=special.sep_id)
  fileio.write_json(fileio.as_str(path), values)
