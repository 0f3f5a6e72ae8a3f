"""The multiple-choice loss on `bert_tf.modeling.finetuning.BertMultipleChoice`: the classifier's,
with the choices as the classes (the mean cross entropy of the softmax over the endings over the
real examples; `eval_accuracy` and `eval_loss` weighted by `is_real_example`)."""

from bert_tf.modeling.finetuning import BertMultipleChoice
from bert_tf.tasks.classifier.task import ClassifierTask


class MultipleChoiceTask(ClassifierTask):
    """`ClassifierTask`'s loss and metrics on `BertMultipleChoice`'s `logits` and `log_probs`
    [batch, choices], `label_ids` the index of the right choice.

    Args:
      config: A `BertConfig`.
      dtype: The model's dtype policy.
    """

    def __init__(self, config, dtype=None):
        self.model = BertMultipleChoice(config, dtype=dtype)
