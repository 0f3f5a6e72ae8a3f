"""SavedModel export for TF Serving: token-id, raw-text and tf.Example signatures.

`module` holds the export `tf.Module` (any model plus the names of its outputs), `versioning`
TF Serving's `<export_dir>/<version>` layout written atomically, `bert` the use of both for
`BertModel` and `BertPretrainer` (`tools/export_saved_model.py`), and `query` one signature run
on one example (`tools/query_saved_model.py`).
"""

from bert_tf.export.bert import PRETRAINING_SIGNATURE, export_bert
from bert_tf.export.module import (
    DEFAULT_SIGNATURE,
    EXAMPLE_SIGNATURE,
    TEXT_PAIR_SIGNATURE,
    TEXT_SIGNATURE,
    TEXT_TOKEN_OUTPUTS,
    TEXT_WINDOWED_SIGNATURE,
    TOKENS_OUTPUT,
    WINDOW_POOLINGS,
    ExportModule,
    NamedLabels,
    ServedModel,
    export_saved_model,
)
from bert_tf.export.versioning import next_version, versioned_directory

__all__ = [
    "DEFAULT_SIGNATURE",
    "EXAMPLE_SIGNATURE",
    "PRETRAINING_SIGNATURE",
    "TEXT_PAIR_SIGNATURE",
    "TEXT_SIGNATURE",
    "TEXT_TOKEN_OUTPUTS",
    "TEXT_WINDOWED_SIGNATURE",
    "TOKENS_OUTPUT",
    "WINDOW_POOLINGS",
    "ExportModule",
    "NamedLabels",
    "ServedModel",
    "export_bert",
    "export_saved_model",
    "next_version",
    "versioned_directory",
]
