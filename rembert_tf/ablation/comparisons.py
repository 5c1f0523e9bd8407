"""The paper's two claims, tested on the suite's rows with their seed noise.

Each claim compares two rows differing in one embedding choice on zero-shot
transfer (the mean over non-English languages): the difference of their
means over seeds gets a Welch t 95% interval (`scipy.stats.ttest_ind`); above zero,
reproduced; below, not reproduced; across zero, inconclusive.

Example:
```python
from rembert_tf.ablation import comparisons
seeds = {"in32_reinvested": [56.0, 57.5, 55.9], "coupled": [52.1, 53.0, 51.2],
         "in32_out512": [55.0, 54.1, 56.2], "in32": [54.8, 55.3, 53.9]}
for result in comparisons.compare_claims(seeds):
  print(comparisons.verdict_line(result))
```
"""
import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from scipy import stats

ENGLISH = "en"
CONFIDENCE = 0.95


@dataclasses.dataclass(frozen=True)
class Claim:
  key: str
  statement: str
  # (row expected to transfer better, its baseline), per scale's row names;
  # the first pair whose two rows both ran is compared.
  pairs: Tuple[Tuple[str, str], ...]


CLAIMS = (
    Claim("reinvested",
          "a small input embedding with the saved parameters reinvested in the "
          "Transformer transfers better than the coupled model of the same #FT",
          (("in32_reinvested", "coupled"),
           ("decoupled_in128_reinvested", "coupled_768"))),
    Claim("output_embedding",
          "a larger output embedding, dropped after pre-training, transfers "
          "better than a small one",
          (("in32_out512", "in32"),
           ("decoupled_in128_out3072", "decoupled_in128"))),
)


def transfer_score(language_scores: Dict[str, float]) -> Optional[float]:
  """Mean over the languages other than English (None when there are none)."""
  others = [v for lang, v in language_scores.items() if lang != ENGLISH]
  return float(np.mean(others)) if others else None


def welch_interval(a: Sequence[float], b: Sequence[float],
                   confidence: float = CONFIDENCE
                   ) -> Tuple[float, Optional[Tuple[float, float]]]:
  """mean(a) - mean(b) and its Welch t interval (None below two seeds each)."""
  diff = float(np.mean(a) - np.mean(b))
  if len(a) < 2 or len(b) < 2:
    return diff, None
  if np.var(a) == 0 and np.var(b) == 0:  # scipy warns on no spread at all
    return diff, (diff, diff)
  low, high = stats.ttest_ind(a, b, equal_var=False).confidence_interval(
      confidence)
  return diff, (float(low), float(high))


def verdict(interval: Optional[Tuple[float, float]]) -> str:
  if interval is None or interval[0] <= 0 <= interval[1]:
    return "inconclusive"
  return "reproduced" if interval[0] > 0 else "not reproduced"


def compare_claims(seed_scores: Dict[str, Sequence[float]]) -> List[Dict]:
  """Each claim whose rows both ran (row name -> per-seed transfer scores): the
  rows, the difference, its interval and the verdict."""
  results = []
  for claim in CLAIMS:
    pair = next(((better, base) for better, base in claim.pairs
                 if seed_scores.get(better) and seed_scores.get(base)), None)
    if pair is None:
      continue
    better, base = pair
    diff, interval = welch_interval(seed_scores[better], seed_scores[base])
    results.append(dict(
        claim=claim.key, statement=claim.statement, row=better, baseline=base,
        num_seeds=[len(seed_scores[better]), len(seed_scores[base])],
        difference=diff, interval=list(interval) if interval else None,
        verdict=verdict(interval)))
  return results


def verdict_line(result: Dict) -> str:
  """One line: the claim, the verdict, the difference and its interval."""
  interval = result["interval"]
  bounds = ("no interval below two seeds per row" if interval is None else
            f"{CONFIDENCE:.0%} CI [{interval[0]:+.1f}, {interval[1]:+.1f}]")
  seeds = "/".join(str(n) for n in result["num_seeds"])
  return (f"**{result['verdict']}**: {result['statement']} "
          f"({result['row']} - {result['baseline']} = "
          f"{result['difference']:+.1f} points, {bounds}, {seeds} seeds)")
