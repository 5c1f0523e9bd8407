"""Progress bars with rate and ETA: redrawn on a terminal, periodic lines elsewhere."""
import io

from rembert_tf.common import progress


class FakeClock:

  def __init__(self):
    self.now = 0.0

  def __call__(self):
    return self.now


def test_format_rate():
  assert progress.format_rate(0.5, "files") == "0.50 files/s"
  assert progress.format_rate(812.4, "ex") == "812 ex/s"


def test_progress_off_a_terminal_writes_periodic_lines_and_a_summary():
  clock, stream = FakeClock(), io.StringIO()
  with progress.Progress("writing records", total=100, unit="docs",
                         stream=stream, interval=30, clock=clock,
                         tty=False) as bar:
    clock.now = 10
    bar.update(10)
    assert stream.getvalue() == ""  # Within the interval: nothing yet.
    clock.now = 40
    bar.update(30, note="1.2M tokens")
    clock.now = 60
    bar.update(60)
  lines = stream.getvalue().splitlines()
  assert lines == [
      "writing records:  40% 40/100 docs | 1.00 docs/s | ETA 1:00 | 1.2M tokens",
      "writing records: 100 docs in 1:00 (1.67 docs/s) | 1.2M tokens"]


def test_progress_on_a_terminal_redraws_one_line():
  clock, stream = FakeClock(), io.StringIO()
  bar = progress.Progress("converting", total=4, unit="tensors", stream=stream,
                          clock=clock, tty=True, width=4)
  for step in range(1, 5):
    clock.now = step
    bar.update()
  bar.close()
  text = stream.getvalue()
  assert text.count("\n") == 1 and text.endswith("\n")
  assert "\rconverting [##..]  50% 2/4 tensors" in text
  assert "ETA 0:02" in text
  assert "4 tensors in 0:04" in text


def test_progress_without_total_counts():
  stream = io.StringIO()
  with progress.Progress("reading", stream=stream, tty=False) as bar:
    bar.update(3)
  assert stream.getvalue().startswith("reading: 3 items in 0:00 (")
