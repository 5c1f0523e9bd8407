"""The ablation suite: the paper's comparison of embedding choices, end to end.

Pre-trains every row on the same records and schedule, fine-tunes each with
the paper's protocol, compares layers with linear CKA, tests the paper's two
claims with their seed noise, and writes the table and pictures.

```python
from rembert_tf.ablation import suite
summary = suite.run_suite(suite.SuiteOptions(output_dir="/tmp/suite", scale="demo"))
```
"""
