"""Tests of the typed model config, the presets, their lookup and parameter counts."""
import json
import subprocess
import sys

import pytest

from rembert_tf.modeling import parameter_count
from rembert_tf.modeling import rembert_config

PAPER_PRESETS = ["rembert", "coupled_768", "decoupled_768", "decoupled_in512",
                 "decoupled_in256", "decoupled_in128",
                 "decoupled_in128_reinvested", "decoupled_in128_out128",
                 "decoupled_in128_out3072",
                 "decoupled_in128_extra_output_layers", "tiny"]


def test_every_paper_model_has_a_preset():
  assert set(PAPER_PRESETS) <= set(rembert_config.available_presets())
  for name in PAPER_PRESETS:
    cfg = rembert_config.load_model_config(name)
    if name not in ("rembert", "tiny"):
      assert cfg.vocab_size == 119547, name
      assert (cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size) == (768, 12, 3072)


def test_released_rembert_preset_matches_the_paper_table():
  cfg = rembert_config.load_model_config("rembert")
  assert (cfg.vocab_size, cfg.input_embedding_size, cfg.hidden_size,
          cfg.num_hidden_layers, cfg.num_attention_heads,
          cfg.intermediate_size, cfg.output_embedding_size) == (
              250300, 256, 1152, 32, 18, 4608, 1664)
  assert cfg.hidden_act == "gelu" and cfg.layer_norm_eps == 1e-12
  assert not cfg.coupled and cfg.hidden_dropout_prob == 0.0


def test_rembert_counts_come_out_at_the_papers_995m_and_575m():
  counts = parameter_count.count_parameters(rembert_config.load_model_config("rembert"))
  assert parameter_count.millions(counts.pt_params) == "995M"
  assert parameter_count.millions(counts.ft_params) == "575M"
  assert counts.pt_params == 994_591_804
  assert counts.ft_params == 574_592_128
  assert counts.pooler_params == 1152 * 1152 + 1152


@pytest.mark.parametrize("overrides", [
    {},
    {"coupled": True, "output_embedding_size": 64},
    {"input_embedding_size": 128},            # no projection
    {"num_output_layers": 2},
    {"num_hidden_layers": 3, "output_embedding_size": 512, "vocab_size": 1234},
])
def test_counts_from_built_models_equal_the_closed_form(overrides):
  cfg = rembert_config.load_model_config("tiny", overrides=overrides)
  built = parameter_count.count_parameters(cfg)
  assert built == parameter_count.closed_form_counts(cfg)
  # And the closed form itself, written out for the tiny decoupled config.
  if not overrides:
    v, e_in, h, ffn, e_out, pos = 2000, 64, 128, 512, 256, 128
    block = 4 * (h * h + h) + 4 * h + h * ffn + ffn + ffn * h + h
    ft = (v + pos + 2) * e_in + 2 * e_in + e_in * h + h + 2 * block
    assert built.ft_params == ft
    assert built.pt_params == ft + h * h + h + h * e_out + 3 * e_out + v + v * e_out


def test_coupled_with_mismatched_sizes_is_refused_naming_the_field():
  with pytest.raises(rembert_config.ConfigError, match="output_embedding_size.*coupled"):
    rembert_config.load_model_config("tiny", overrides={"coupled": True})


def test_heads_must_divide_hidden_size():
  with pytest.raises(rembert_config.ConfigError, match="hidden_size.*num_attention_heads"):
    rembert_config.load_model_config("tiny", overrides={"num_attention_heads": 3})


def test_unknown_key_in_yaml_is_refused_naming_key_and_file(tmp_path):
  path = tmp_path / "bad.yaml"
  path.write_text("vocab_size: 100\nhiden_size: 64\n")
  with pytest.raises(rembert_config.ConfigError) as err:
    rembert_config.load_model_config(str(path))
  assert "hiden_size" in str(err.value) and "bad.yaml" in str(err.value)
  assert "hidden_size" in str(err.value)  # lists the valid fields


def test_unknown_preset_lists_the_presets():
  with pytest.raises(rembert_config.ConfigError, match="rembert.*tiny"):
    rembert_config.load_model_config("no_such_model")


def test_save_and_load_round_trip(tmp_path):
  cfg = rembert_config.load_model_config("tiny", overrides={"num_output_layers": 1})
  rembert_config.save_model_config(cfg, tmp_path / "model_config.yaml")
  assert rembert_config.load_model_config(tmp_path / "model_config.yaml") == cfg
  assert not list(tmp_path.glob("*.tmp"))


def test_param_table_tool_prints_json_and_markdown(tmp_path):
  small = tmp_path / "small.yaml"
  small.write_text("vocab_size: 100\nhidden_size: 32\nnum_hidden_layers: 1\n"
                   "num_attention_heads: 2\nintermediate_size: 64\n"
                   "input_embedding_size: 16\noutput_embedding_size: 48\n")
  root = str(rembert_config.CONFIG_ROOT.parent)
  run = lambda *args: subprocess.run(
      [sys.executable, "tools/param_table.py", *args], capture_output=True,
      text=True, check=True, cwd=root).stdout
  rows = json.loads(run("tiny", str(small), "--json").strip().splitlines()[-1])
  assert rows[0] == {"config": "tiny", "pt_params": 1_105_360, "ft_params": 541_312}
  expected = parameter_count.closed_form_counts(
      rembert_config.load_model_config(small))
  assert rows[1] == {"config": "small", "pt_params": expected.pt_params,
                     "ft_params": expected.ft_params}
  table = run("tiny", "rembert")
  assert ("| tiny | 64 | 256 | 2+0 | False | 1.11M | 0.541M | 16,512 | "
          "1,105,360 | 541,312 |") in table
  assert "| rembert | 256 | 1664 | 32+0 | False | 995M | 575M |" in table


@pytest.mark.parametrize("preset", [
    "tiny", "demo_ablation_coupled", "demo_ablation_in32_reinvested",
    "demo_ablation_in32_extra_output_layers", "decoupled_in128_out128"])
def test_closed_form_counts_equal_the_built_presets(preset):
  """What rembert-param-table prints (the closed form) is what a built
  model of the preset holds."""
  cfg = rembert_config.load_model_config(preset)
  assert (parameter_count.closed_form_counts(cfg)
          == parameter_count.count_parameters(cfg))


def test_counts_print_three_significant_digits_below_100m():
  assert [parameter_count.millions(n) for n in (
      994_591_804, 100_000_000, 99_400_000, 1_105_360, 541_312)] == [
          "995M", "100M", "99.4M", "1.11M", "0.541M"]


def test_presets_are_found_through_the_one_resolver():
  root = rembert_config.config_root()
  assert (root / "models" / "tiny.yaml").is_file()
  assert (root / "experiments").is_dir()
  assert rembert_config.resolve_model_config_path("tiny") == str(
      root / "models" / "tiny.yaml")
  with pytest.raises(rembert_config.ConfigError, match=r"no model preset "
                     r"named 'tinyy'; presets: .*\btiny\b"):
    rembert_config.resolve_model_config_path("tinyy")


def test_model_config_files_on_any_tensorflow_filesystem():
  cfg = rembert_config.load_model_config("tiny", {"num_output_layers": 1})
  rembert_config.save_model_config(cfg, "ram://configs/model_config.yaml")
  assert rembert_config.load_model_config(
      "ram://configs/model_config.yaml") == cfg
  with pytest.raises(rembert_config.ConfigError, match="does not exist"):
    rembert_config.load_model_config("ram://configs/missing.yaml")
