"""The ablation suite: the paper's comparison of embedding choices, end to end.

Entry point: `suite.run_suite(suite.SuiteOptions(...))` (`rembert-run-ablation`).
"""
