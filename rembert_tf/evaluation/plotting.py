"""Figures as PNG files on any filesystem: matplotlib `Figure`s (no pyplot state to close), written with `fileio`.

Example:
```python
from rembert_tf.evaluation import plotting
figure, axes = plotting.new_figure(width=4, height=3)
axes.plot([1, 2, 3], [0.1, 0.4, 0.5])
plotting.save_png(figure, "curve.png")
```
"""
import io

from rembert_tf.common import fileio


def new_figure(width: float = 6.0, height: float = 4.0, rows: int = 1,
               cols: int = 1):
  """(figure, axes) of the given size in inches; axes is an array if > 1."""
  from matplotlib import figure  # pylint: disable=g-import-not-at-top
  new = figure.Figure(figsize=(width, height))
  return new, new.subplots(rows, cols, squeeze=True)


def save_png(figure, path, dpi: int = 110) -> None:
  """Renders `figure` to PNG bytes and writes them atomically."""
  buffer = io.BytesIO()
  figure.tight_layout()
  figure.savefig(buffer, format="png", dpi=dpi)
  fileio.write_bytes(path, buffer.getvalue())
