"""Rewrites a module of rembert_tf.keras_hub into keras-hub's package.

Edits are made on the module's syntax tree (Python's `ast`: the spans of
import statements, attribute chains and decorators), so code changes and
docstrings and comments stay as written; `rewrite_module` is the entry.

| in this project                                   | in keras-hub                                         |
| ------------------------------------------------- | ---------------------------------------------------- |
| `from rembert_tf.keras_hub import rembert_x`      | `from keras_hub.src.models.rembert import rembert_x` |
| `from rembert_tf.keras_hub import RemBertX`       | `from keras_hub.src.models.rembert.rembert_x import RemBertX` |
| `from rembert_tf import keras_hub as rk`          | `from keras_hub.src.models import rembert as rk`      |
| `transformers_checkpoint`                         | `keras_hub.src.utils.transformers.convert_rembert`   |
| `keras_hub.models.Backbone` (public API)          | `Backbone`, imported from its `keras_hub.src` module  |
| `@keras.saving.register_keras_serializable(package="rembert_tf")` | `@keras_hub_export("keras_hub.models.RemBertX")` |
| `errors.InputError` (rembert_tf.common)           | `ValueError`                                         |
| `weight_layout.hf_name`, `HF_ACTIVATIONS` (rembert_tf.conversion) | the names, their definitions copied (`vendored_names`) |

An import of any other rembert_tf module has no place in keras-hub and is
refused (`LayoutError`).
"""
import ast
import importlib
import re
from typing import Dict, Iterable, List, Optional, Set, Tuple

PACKAGE = "rembert_tf.keras_hub"
MODELS = "keras_hub.src.models.rembert"
CONVERTER = "keras_hub.src.utils.transformers.convert_rembert"
PUBLIC_SUBPACKAGES = ("models", "layers", "tokenizers", "samplers", "utils")
# weight_layout names the converter reads, copied into it.
VENDORED = ("PROJECTION_KERNEL", "PROJECTION_BIAS", "HF_ACTIVATIONS",
            "hf_name", "is_identity_projection")
EXPORT_IMPORT = "from keras_hub.src.api_export import keras_hub_export"


class LayoutError(ValueError):
  """A module of the port cannot be laid out in keras-hub as it is."""


class Context:
  """What the rewrites need to know about the port."""

  def __init__(self, module_names: Iterable[str], class_modules: Dict[str, str],
               public: Iterable[str], package_alias_target: str = None):
    self.module_names = set(module_names)       # rembert_x, canonical_weights
    self.class_modules = dict(class_modules)    # RemBertX -> rembert_x
    self.public = set(public)                   # rembert_tf.keras_hub.__all__
    # `from rembert_tf import keras_hub as rk` -> this module path.
    self.package_alias_target = package_alias_target or MODELS


def _module_target(name: str) -> str:
  if name == "transformers_checkpoint":
    return f"from keras_hub.src.utils.transformers import convert_rembert as {name}"
  return f"from {MODELS} import {name}"


def _alias(alias: ast.alias) -> str:
  return f"{alias.name} as {alias.asname}" if alias.asname else alias.name


def _import_lines(node: ast.ImportFrom, ctx: Context, where: str) -> List[str]:
  """The keras-hub import statements replacing a `from rembert_tf...` one."""
  module, lines = node.module, []
  for alias in node.names:
    if module == PACKAGE and alias.name in ctx.module_names:
      line = _module_target(alias.name)
      lines.append(line + (f" as {alias.asname}" if alias.asname and
                           " as " not in line else ""))
    elif module == PACKAGE and alias.name in ctx.class_modules:
      lines.append(f"from {MODELS}.{ctx.class_modules[alias.name]} import "
                   f"{_alias(alias)}")
    elif module.startswith(PACKAGE + "."):
      target = module[len(PACKAGE) + 1:]
      base = CONVERTER if target == "transformers_checkpoint" else (
          f"{MODELS}.{target}")
      lines.append(f"from {base} import {_alias(alias)}")
    elif module == "rembert_tf" and alias.name == "keras_hub":
      package, _, name = ctx.package_alias_target.rpartition(".")
      alias_name = alias.asname or name
      lines.append(f"from {package} import {name}" + (
          f" as {alias_name}" if alias_name != name else ""))
    elif module == "rembert_tf.common" and alias.name == "errors":
      continue                      # errors.InputError -> ValueError
    elif module == "rembert_tf.conversion" and alias.name == "weight_layout":
      continue                      # the names it needs are copied
    elif module == "rembert_tf.conversion.weight_layout" and (
        alias.name in VENDORED):
      lines.append(f"from {CONVERTER} import {_alias(alias)}")
    else:
      raise LayoutError(
          f"{where}:{node.lineno}: imports {alias.name} from {module}, which "
          "has no place in keras-hub; move what it needs into "
          f"{PACKAGE} or teach tools/keras_hub_contribution its keras-hub home.")
  return lines


def _line_offsets(data: bytes) -> List[int]:
  offsets, total = [0], 0
  for line in data.splitlines(keepends=True):
    total += len(line)
    offsets.append(total)
  return offsets


class _Edits:
  """Byte-span replacements on a module's source (ast columns are bytes)."""

  def __init__(self, source: str):
    self.data = source.encode("utf-8")
    self.offsets = _line_offsets(self.data)
    self.spans: List[Tuple[int, int, str]] = []

  def span(self, node, whole_lines=False) -> Tuple[int, int]:
    first = min([node.lineno] + [d.lineno for d in getattr(
        node, "decorator_list", [])])
    if whole_lines:
      return self.offsets[first - 1], self.offsets[node.end_lineno]
    return (self.offsets[node.lineno - 1] + node.col_offset,
            self.offsets[node.end_lineno - 1] + node.end_col_offset)

  def replace(self, node, text: str, whole_lines=False) -> None:
    start, end = self.span(node, whole_lines)
    self.spans.append((start, end, text))

  def apply(self) -> str:
    data = self.data
    for start, end, text in sorted(self.spans, reverse=True):
      data = data[:start] + text.encode("utf-8") + data[end:]
    return data.decode("utf-8")


def _public_name(chain: ast.Attribute) -> Optional[Tuple[str, str]]:
  """`keras_hub.models.Backbone` -> ("models", "Backbone")."""
  inner = chain.value
  if (isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name)
      and inner.value.id == "keras_hub" and inner.attr in PUBLIC_SUBPACKAGES):
    return inner.attr, chain.attr
  return None


def _defining_module(subpackage: str, name: str) -> str:
  """keras-hub's own module of a public name (the installed keras-hub)."""
  keras_hub = importlib.import_module("keras_hub")
  return getattr(getattr(keras_hub, subpackage), name).__module__


def _export_decorator(name: str, ctx: Context) -> str:
  if name not in ctx.public:
    return 'keras.saving.register_keras_serializable(package="keras_hub")'
  api = "layers" if name.endswith("Head") else "models"
  return f'keras_hub_export("keras_hub.{api}.{name}")'


def _is_project_registration(decorator) -> bool:
  return (isinstance(decorator, ast.Call)
          and ast.unparse(decorator.func).endswith("register_keras_serializable")
          and any(k.arg == "package" and getattr(k.value, "value", None)
                  == "rembert_tf" for k in decorator.keywords))


def _rewrite_nodes(tree, edits: _Edits, ctx: Context, where: str) -> Set[str]:
  """Queues every edit; returns the import lines the module now needs."""
  needed: Set[str] = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.module and (
        node.module.startswith("rembert_tf")):
      indent = " " * node.col_offset
      lines = _import_lines(node, ctx, where)
      edits.replace(node, "".join(f"{indent}{line}\n" for line in lines),
                    whole_lines=True)
    elif isinstance(node, ast.Attribute) and _public_name(node):
      subpackage, name = _public_name(node)
      needed.add(f"from {_defining_module(subpackage, name)} import {name}")
      edits.replace(node, name)
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
      if node.value.id == "errors" and node.attr == "InputError":
        edits.replace(node, "ValueError")
      elif node.value.id == "weight_layout":
        edits.replace(node, node.attr)
    elif isinstance(node, (ast.ClassDef, ast.FunctionDef)):
      for decorator in node.decorator_list:
        if _is_project_registration(decorator):
          text = _export_decorator(node.name, ctx)
          needed.add(EXPORT_IMPORT) if "keras_hub_export" in text else None
          edits.replace(decorator, text)
  return needed


def _add_imports(source: str, needed: Set[str]) -> str:
  """Puts the needed imports where `import keras_hub` was (dropped once no
  `keras_hub.` attribute is left), else before the first import."""
  tree = ast.parse(source)
  still_used = any(isinstance(n, ast.Name) and n.id == "keras_hub"
                   for n in ast.walk(tree))
  lines = source.splitlines(keepends=True)
  imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
  anchor = next((n for n in imports if isinstance(n, ast.Import) and
                 [a.name for a in n.names] == ["keras_hub"]), None)
  block = "".join(f"{line}\n" for line in sorted(needed))
  if anchor is not None:
    keep = lines[anchor.lineno - 1] if still_used else ""
    lines[anchor.lineno - 1] = keep + block
  elif block:
    first = imports[0].lineno - 1 if imports else 0
    lines[first] = block + lines[first]
  return "".join(lines)


def drop_unused_imports(source: str) -> str:
  """Removes top-level imports whose names the module no longer uses."""
  tree = ast.parse(source)
  used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
  lines = source.splitlines(keepends=True)
  for node in reversed(tree.body):
    if isinstance(node, (ast.Import, ast.ImportFrom)):
      names = [(a.asname or a.name).split(".")[0] for a in node.names]
      if not any(name in used for name in names):
        del lines[node.lineno - 1:node.end_lineno]
  return "".join(lines)


def vendored_names(weight_layout_source: str) -> str:
  """The definitions of VENDORED, as weight_layout.py writes them, with
  its ConversionError as ValueError."""
  tree = ast.parse(weight_layout_source)
  parts = []
  for node in tree.body:
    names = ([t.id for t in node.targets if isinstance(t, ast.Name)]
             if isinstance(node, ast.Assign) else [getattr(node, "name", None)])
    if any(name in VENDORED for name in names):
      parts.append(ast.get_source_segment(weight_layout_source, node))
  found = " ".join(parts)
  missing = [n for n in VENDORED if not re.search(rf"\b{n}\b", found)]
  if missing:
    raise LayoutError(f"rembert_tf/conversion/weight_layout.py: no "
                      f"{', '.join(missing)} to copy into the converter.")
  text = parts[0]
  for before, part in zip(parts, parts[1:]):
    definition = part.startswith("def ") or before.startswith("def ")
    text += ("\n\n\n" if definition else "\n") + part
  return text.replace("ConversionError(", "ValueError(") + "\n"


def rewrite_module(source: str, ctx: Context, where: str) -> str:
  """One module's source, rewritten for keras-hub (see the module docstring)."""
  tree = ast.parse(source, filename=where)
  edits = _Edits(source)
  needed = _rewrite_nodes(tree, edits, ctx, where)
  rewritten = edits.apply()
  # Docstring examples import the public API.
  rewritten = rewritten.replace(f"from {PACKAGE} import", "from keras_hub.models import")
  return _add_imports(rewritten, needed)
