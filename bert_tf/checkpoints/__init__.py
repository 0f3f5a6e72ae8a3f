"""Checkpoints: Google's layout in and out, the checked converter, the float64 reference, counts."""

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
