"""The typed model config of RemBERT and its YAML presets.

Builds on Model Garden's `hyperparams.Config`, so a model config nests in an
`ExperimentConfig` and takes `--params_override`. Field names are the
released RemBERT / Hugging Face config keys.

Example:
```python
from rembert_tf.modeling import rembert_config
cfg = rembert_config.load_model_config("tiny")            # a preset by name
cfg = rembert_config.load_model_config("rembert",         # or a YAML file's path
                                       overrides={"num_hidden_layers": 2})
```
"""
import dataclasses
import importlib.resources
import os
import pathlib
from typing import Any, Mapping, Optional, Union

from official.modeling import hyperparams
import yaml

from rembert_tf.common import errors
from rembert_tf.common import fileio


def config_root() -> pathlib.Path:
  """The folder of the shipped presets (the wheel's `rembert_tf/configs/`, or
  the checkout's `configs/`)."""
  # files() of a regular (non-zipped) package is a pathlib.Path.
  package_dir = importlib.resources.files("rembert_tf")
  packaged = package_dir / "configs"
  if packaged.is_dir():
    return packaged
  checkout = package_dir.parent / "configs"
  if (checkout / "models").is_dir():
    return checkout
  raise ConfigError(
      f"the shipped configs are missing: neither {packaged} (an installed "
      f"wheel) nor {checkout} (a checkout) exists. Reinstall rembert_tf.")


SUPPORTED_ACTIVATIONS = ("gelu", "gelu_approx", "relu", "tanh", "swish")


class ConfigError(errors.RemBertError, ValueError):
  """A config value is missing, unknown or inconsistent; the message names the field."""


# Resolved once at import (`config_root()` raises ConfigError, defined above).
CONFIG_ROOT = config_root()
MODEL_CONFIG_DIR = CONFIG_ROOT / "models"


@dataclasses.dataclass
class RemBertConfig(hyperparams.Config):
  """Architecture of a RemBERT-style encoder and its pre-training output side.

  Defaults are the released RemBERT (see `configs/models/rembert.yaml`).

  Attributes:
    vocab_size: SentencePiece vocabulary size, shared by input and output side.
    hidden_size: Transformer width.
    num_hidden_layers: Transformer blocks in the encoder (kept for fine-tuning).
    num_attention_heads: Heads per attention layer; must divide hidden_size.
    intermediate_size: Feed-forward inner width.
    input_embedding_size: E_in, width of word/position/type embeddings. When it
      differs from hidden_size a dense projection (with bias) maps E_in -> hidden.
    output_embedding_size: E_out, width of the MLM head's output embedding
      (pre-training only). Must equal input_embedding_size when `coupled`.
    hidden_act: "gelu" (exact, erf: the released config) or "gelu_approx"
      (tanh approximation, original BERT), "relu", "tanh" or "swish".
    hidden_dropout_prob: Dropout on embeddings and block outputs.
    attention_probs_dropout_prob: Dropout on attention probabilities.
    max_position_embeddings: Longest sequence the position table covers.
    type_vocab_size: Number of token-type (segment) ids.
    layer_norm_eps: Epsilon of every LayerNorm.
    initializer_range: Stddev of the truncated-normal initialiser.
    coupled: If True the MLM logits use the encoder's input word-embedding
      table (the BERT baseline); if False the head owns a separate
      [vocab_size, output_embedding_size] output embedding (RemBERT).
    num_output_layers: Extra Transformer blocks between the encoder and the
      MLM head, trained in pre-training and discarded with the output side.
  """
  vocab_size: int = 250300
  hidden_size: int = 1152
  num_hidden_layers: int = 32
  num_attention_heads: int = 18
  intermediate_size: int = 4608
  input_embedding_size: int = 256
  output_embedding_size: int = 1664
  hidden_act: str = "gelu"
  hidden_dropout_prob: float = 0.0
  attention_probs_dropout_prob: float = 0.0
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  layer_norm_eps: float = 1e-12
  initializer_range: float = 0.02
  coupled: bool = False
  num_output_layers: int = 0

  def validate(self):
    """Raises ConfigError naming the first inconsistent field."""
    positive = ("vocab_size", "hidden_size", "num_hidden_layers",
                "num_attention_heads", "intermediate_size",
                "input_embedding_size", "output_embedding_size",
                "max_position_embeddings", "type_vocab_size")
    for name in positive:
      value = getattr(self, name)
      if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"model config field `{name}` must be a positive "
                          f"integer, got {value!r}.")
    if self.num_output_layers < 0:
      raise ConfigError("model config field `num_output_layers` must be >= 0, "
                        f"got {self.num_output_layers}.")
    if self.hidden_size % self.num_attention_heads:
      raise ConfigError(
          f"model config field `hidden_size` ({self.hidden_size}) is not "
          f"divisible by `num_attention_heads` ({self.num_attention_heads}); "
          "choose a head count that divides the hidden size.")
    if self.coupled and self.output_embedding_size != self.input_embedding_size:
      raise ConfigError(
          "model config field `output_embedding_size` "
          f"({self.output_embedding_size}) must equal `input_embedding_size` "
          f"({self.input_embedding_size}) when `coupled: true`: a coupled MLM "
          "head multiplies by the input word-embedding table. Set `coupled: "
          "false` for a separate output embedding, or make the sizes equal.")
    if self.hidden_act not in SUPPORTED_ACTIVATIONS:
      raise ConfigError(
          f"model config field `hidden_act` is {self.hidden_act!r}; expected "
          f"one of {', '.join(SUPPORTED_ACTIVATIONS)}.")
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
      value = getattr(self, name)
      if not 0.0 <= value < 1.0:
        raise ConfigError(f"model config field `{name}` must be in [0, 1), "
                          f"got {value}.")
    if self.layer_norm_eps <= 0 or self.initializer_range <= 0:
      raise ConfigError("model config fields `layer_norm_eps` and "
                        "`initializer_range` must be positive.")
    return self


def field_names():
  return [f.name for f in dataclasses.fields(RemBertConfig)]


def model_config_from_dict(values: Mapping[str, Any],
                           source: str = "<dict>") -> RemBertConfig:
  """Builds a validated RemBertConfig; unknown keys are an error naming them."""
  if not isinstance(values, Mapping):
    raise ConfigError(f"{source}: a model config must be a mapping of "
                      f"field: value, got {type(values).__name__}.")
  known = set(field_names())
  unknown = sorted(k for k in values if k not in known)
  if unknown:
    raise ConfigError(
        f"{source}: unknown model config field(s) {', '.join(unknown)}. "
        f"Valid fields: {', '.join(sorted(known))}.")
  cfg = RemBertConfig()
  cfg.override(dict(values), is_strict=True)
  try:
    return cfg.validate()
  except ConfigError as e:
    raise ConfigError(f"{source}: {e}") from None


def resolve_model_config_path(name_or_path: Union[str, os.PathLike]) -> str:
  """A preset name (`tiny`, `rembert`, ...) or a YAML path -> the YAML path.

  A path may be on any TensorFlow filesystem (`gs://bucket/model.yaml`).
  """
  path = fileio.as_str(name_or_path)
  if path.endswith((".yaml", ".yml")):
    if not fileio.exists(path):
      raise ConfigError(f"model config file {path} does not exist.")
    return path
  preset = MODEL_CONFIG_DIR / f"{path}.yaml"
  if not preset.is_file():
    raise ConfigError(
        f"no model preset named {path!r}; presets: "
        f"{', '.join(available_presets())}, or give a path to a YAML file.")
  return str(preset)


def available_presets():
  return sorted(p.stem for p in MODEL_CONFIG_DIR.glob("*.yaml"))


def load_model_config(name_or_path: Union[str, os.PathLike],
                      overrides: Optional[Mapping[str, Any]] = None
                      ) -> RemBertConfig:
  """Loads a model preset or YAML file, applies overrides and validates."""
  path = resolve_model_config_path(name_or_path)
  values = yaml.safe_load(fileio.read_text(path)) or {}
  if isinstance(values, Mapping) and "model" in values and len(values) == 1:
    values = values["model"]  # Also accept `model: {...}` wrapped files.
  if not isinstance(values, Mapping):
    raise ConfigError(f"{path}: a model config must be a mapping of "
                      f"field: value, got {type(values).__name__}.")
  values = dict(values)
  values.update(overrides or {})
  return model_config_from_dict(values, source=path)


def save_model_config(cfg: RemBertConfig, path: Union[str, os.PathLike]):
  """Writes the config as YAML (atomically: temporary name, then rename)."""
  fileio.write_text(path, yaml.safe_dump(cfg.as_dict(), sort_keys=False))
