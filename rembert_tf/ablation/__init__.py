"""The ablation suite: the paper's comparison of embedding choices, end to end.

Pre-trains every row (the paper's base-scale experiments, or their demo-size
versions, trained for minutes at demo scale or an hour at small scale) on the
same records with the same schedule, fine-tunes each with the paper's
protocol, compares layers with linear CKA, tests the paper's two claims with
their seed noise, and writes the paper-style table and pictures. It orchestrates the whole flow, so nothing imports it.

```python
from rembert_tf.ablation import suite
summary = suite.run_suite(suite.SuiteOptions(output_dir="/tmp/suite", scale="demo"))
```
"""
