"""Refuses an output that is, holds or lies inside one of its inputs, by the
real paths of `rembert_tf.common.fileio` (writing it would lose that input).
"""
from typing import Mapping, Optional

from rembert_tf.common import errors
from rembert_tf.common import fileio


def refuse_overlap(output: Optional[fileio.PathLike],
                   inputs: Mapping[str, Optional[fileio.PathLike]],
                   output_label: str = "the output") -> None:
  """errors.UsageError when `output` is, holds or lies inside one of
  `inputs` ({how the user named it, e.g. "--model_dir": path or None}),
  comparing real paths: writing it would replace or delete that input."""
  if output is None:
    return
  out = fileio.real_path(output).rstrip("/")
  for label, path in inputs.items():
    real = fileio.real_path(path or "").rstrip("/")
    how = (None if not path or not fileio.as_str(path) else "is" if real == out
           else "holds" if real.startswith(out + "/")
           else "lies inside" if out.startswith(real + "/") else None)
    if how:
      raise errors.UsageError(
          f"{output_label} {fileio.as_str(output)} {how} {label} "
          f"{fileio.as_str(path)} (real paths {out} and {real}); writing it "
          f"would replace or delete that input. Choose {output_label} outside "
          f"{label}.")
