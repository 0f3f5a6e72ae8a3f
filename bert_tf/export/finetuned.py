"""SavedModel export of a fine-tuned model (`--export_dir` of the fine-tuning tools): the outputs
its head serves and the names of its labels, from the heads' table
(`bert_tf.modeling.head_table`)."""

import logging

from bert_tf.export.module import NamedLabels, export_saved_model
from bert_tf.modeling.head_table import PER_TOKEN, head_of_model

logger = logging.getLogger(__name__)


def export_finetuned(
    model,
    pretrained,
    max_seq_length,
    export_dir,
    labels=None,
    max_text_a_tokens=None,
    doc_stride=None,
    window_pooling="mean",
):
    """Writes a fine-tuned model as a SavedModel version under `export_dir`.

    Every signature returns the head's outputs (`Head.outputs`); a head with labels also returns
    the names of the best ones (`Head.label_output`, by `NamedLabels`), and a head with outputs
    per token has the text signatures return the tokens they fed the model, with their offsets
    (`bert_tf.export.ExportModule`'s `text_tokens`).

    Args:
      model: A restored `BertWithHead` (float32).
      pretrained: The model's files (`bert_tf.checkpoints.pretrained.Pretrained`): its
        vocabulary and casing go into the text signatures.
      max_seq_length: The signatures' longest sequence.
      export_dir: TF Serving's model base path.
      labels: The labels in the head's order, for a head with labels.
      max_text_a_tokens: How `text_pair` truncates (`bert_tf.export.ExportModule`).
      doc_stride, window_pooling: None, or the `text_windowed` signature's windows and how it
        pools the scores (`bert_tf.export.ExportModule`).

    Returns:
      The version directory written.

    Raises:
      ValueError: A model of no head in the table, or labels missing for a head with labels.
    """
    head = head_of_model(model)
    if head is None:
        raise ValueError(f"{type(model).__name__} is not a fine-tuned model of the heads' table")
    output_names = tuple(head.outputs)
    if head.labels:
        if labels is None:
            raise ValueError(f"a {head.name} exports the names of its labels: give them")
        model = NamedLabels(model, labels, "probabilities", head.label_output)
        output_names = (*output_names, head.label_output)
    path = export_saved_model(
        model,
        output_names,
        pretrained.vocab_file,
        pretrained.do_lower_case,
        max_seq_length,
        export_dir,
        config=pretrained.config,
        text_tokens=PER_TOKEN in head.outputs.values(),
        max_text_a_tokens=max_text_a_tokens,
        doc_stride=doc_stride,
        window_pooling=window_pooling,
        choices=head.choices,
    )
    logger.info("Exported %s", path)
    return path
