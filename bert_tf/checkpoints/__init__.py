"""Checkpoints: Google's layout in and out (`google`), the one loader of a pretrained model that
every tool uses (`pretrained`: `--init_checkpoint`, `--bert_config_file`, `--vocab_file` checked
together), the checked converter (`converter`), the float64 NumPy reference (`reference`), the
parameter counts (`parameters`) and the vocabulary extension (`vocab_extension`)."""

from bert_tf.checkpoints.google import (
    LoadReport,
    load_google_checkpoint,
    open_checkpoint,
    resolve_checkpoint_prefix,
    save_google_checkpoint,
    write_checkpoint,
)

__all__ = [
    "LoadReport",
    "load_google_checkpoint",
    "open_checkpoint",
    "resolve_checkpoint_prefix",
    "save_google_checkpoint",
    "write_checkpoint",
]
