"""Console output: loop lines, progress bars with ETA, orbit's lines kept off the console."""
import io

import pytest

from rembert_tf.common import console


class FakeClock:

  def __init__(self):
    self.now = 0.0

  def __call__(self):
    return self.now


@pytest.mark.parametrize("seconds,text", [
    (0, "0:00"), (62.4, "1:02"), (3723, "1:02:03"), (None, "?"),
    (float("inf"), "?"), (-1, "?")])
def test_format_duration(seconds, text):
  assert console.format_duration(seconds) == text


def test_format_count_and_rate():
  assert [console.format_count(v) for v in (950, 12_345, 4.5e6, 2.5)] == [
      "950", "12.3k", "4.5M", "2.5"]
  assert console.format_rate(0.5, "files") == "0.50 files/s"
  assert console.format_rate(812.4, "ex") == "812 ex/s"


def test_loop_line_has_every_figure_and_aligns_steps():
  line = console.loop_line(40, 300, loss=5.21042, accuracy=0.11304,
                           accuracy_name="mlm_acc", examples_per_second=812.4,
                           learning_rate=1e-4, eta_seconds=62)
  assert line == ("step  40/300 | loss 5.2104 | mlm_acc 0.1130 | 812 ex/s | "
                  "lr 1.00e-04 | ETA 1:02")
  later = console.loop_line(300, 300, loss=1.0)
  assert later.index("|") == line.index("|")
  assert console.loop_line(7) == "step 7"


def test_eta_uses_the_pace_after_the_first_observation():
  clock = FakeClock()
  eta = console.Eta(total=100, clock=clock)
  clock.now = 50.0  # A slow first step (compilation) is not counted.
  assert eta.observe(10) is None
  clock.now = 60.0
  assert eta.observe(30) == pytest.approx(35.0)  # 70 left at 2 per second.
  assert eta.rate == pytest.approx(2.0)


def test_progress_off_a_terminal_writes_periodic_lines_and_a_summary():
  clock, stream = FakeClock(), io.StringIO()
  with console.progress("writing records", total=100, unit="docs",
                        stream=stream, interval=30, clock=clock, tty=False) as bar:
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
  bar = console.Progress("converting", total=4, unit="tensors", stream=stream,
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
  with console.progress("reading", stream=stream, tty=False) as bar:
    bar.update(3)
  assert stream.getvalue().startswith("reading: 3 items in 0:00 (")
