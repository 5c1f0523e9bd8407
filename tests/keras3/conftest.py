"""The keras-hub tests reuse the XTREME fine-tuning fixtures: the tiny
`download/` folder, its SentencePiece model and a one-layer checkpoint."""
from finetuning.conftest import checkpoint_dir  # noqa: F401  (shared fixtures)
from finetuning.conftest import download_dir  # noqa: F401
from finetuning.conftest import sp_model  # noqa: F401
from finetuning.conftest import tiny_cfg  # noqa: F401
