"""`ModelFileOptions`: the flags naming a pretrained model's files (`--bert_config_file`,
`--vocab_file`, `--init_checkpoint`), how its text is tokenized (`--do_lower_case`,
`--force_do_lower_case`) and the sequence
length checked against it (`--max_seq_length`), declared once for every tool that reads a model.

A tool's options mix it in, or `bert_tf.options.redefine` its fields (a frozen dataclass, a
tool's own default); a tool omits those it has no use for (`define_flags(..., omit=...)`). What
the files mean is `bert_tf.checkpoints.pretrained`'s; this module imports nothing heavy (the
pretraining-data workers read it without TensorFlow).
"""

import dataclasses

from bert_tf.options import option

_OWN = object()  # `ModelFileOptions.open`: the options' own value


@dataclasses.dataclass
class ModelFileOptions:
    """The flags naming a pretrained model's files, and the sequence length checked against them:
    declared here once, mixed into the options of every tool that reads a model (a tool may
    `bert_tf.options.redefine` one's default or requiredness, or omit one it has no use for)."""

    bert_config_file: str = option(
        None, "The model's bert_config.json (a .keras --init_checkpoint holds its own config)."
    )
    vocab_file: str = option(None, "The vocab.txt the model was trained with.")
    do_lower_case: bool = option(
        None,
        "Lower-case the input and strip accents: True for uncased models, False for cased ones "
        "(default: the model's recorded setting, else inferred from the vocabulary: the original's "
        "True for an uncased one).",
    )
    force_do_lower_case: bool = option(
        False,
        "Use --do_lower_case as given where the model's recorded setting or its vocabulary says "
        "otherwise (docs/checkpoints.md, Casing).",
    )
    init_checkpoint: str = option(
        None, "The model's weights: a Google checkpoint (prefix or directory) or a .keras file."
    )
    max_seq_length: int = option(
        128,
        "Tokens per sequence after WordPiece, [CLS] and [SEP] included; longer inputs are truncated "
        "(or read as windows), shorter ones padded.",
    )

    def open(self, init_checkpoint=_OWN, do_lower_case=_OWN, max_seq_length=_OWN):
        """`bert_tf.checkpoints.pretrained.open_pretrained` of these files, before any work.

        Args:
          init_checkpoint: The weights to read instead of `--init_checkpoint`, e.g. None where a
            run resumes from its own checkpoint (`TrainingOptions.init_checkpoint_read`).
          do_lower_case: As the flag (None: not given; the casing is then resolved from the
            model's files, `bert_tf.text.casing`).
          max_seq_length: None for a tool that packs no sequence, else as the flag.

        Returns:
          A `Pretrained`.

        Raises:
          ValueError: As `open_pretrained`.
        """

        def own(value, name):
            return getattr(self, name) if value is _OWN else value

        from bert_tf.checkpoints.pretrained import open_pretrained

        return open_pretrained(
            self.bert_config_file,
            self.vocab_file,
            own(do_lower_case, "do_lower_case"),
            own(init_checkpoint, "init_checkpoint"),
            own(max_seq_length, "max_seq_length"),
            self.force_do_lower_case,
        )
