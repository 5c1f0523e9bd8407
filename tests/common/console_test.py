"""The training loops' console line: its counts, durations and ETA."""
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


def test_format_count():
  assert [console.format_count(v) for v in (950, 12_345, 4.5e6, 2.5)] == [
      "950", "12.3k", "4.5M", "2.5"]


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
