"""The table of fine-tuning heads: each head's model, its variables' names in a Google checkpoint
and in a Hugging Face model, and the outputs an export serves.

`bert_tf.checkpoints.hf` (converting both ways), `bert_tf.checkpoints.converter`,
`bert_tf.export` and `bert_tf.export.edge` read heads from here and name none themselves. Adding a
head is its class in `bert_tf.modeling.finetuning` plus one `Head` in `HEADS` (BUILD_NOTES,
"Heads").
"""

import dataclasses

from bert_tf.modeling.finetuning import (
    BertClassifier,
    BertMultipleChoice,
    BertRegressor,
    BertSquad,
    BertTagger,
)

# How an exported output is laid out (and how the edge export checks an int8 file's values):
# a vector per token, a vector per example, class probabilities, or one score per example.
PER_TOKEN, PER_EXAMPLE, CLASSES, SCORES = "per_token", "per_example", "classes", "scores"


@dataclasses.dataclass(frozen=True)
class Head:
    """A fine-tuning head.

    Attributes:
      name: The head's name in logs and errors ("classifier").
      model: Its `BertWithHead` class.
      scope: The Google scope of its `output_weights` and `output_bias`: "" (the original's
        classifier, top level) or "cls/<scope>/".
      hf_architecture: The transformers class of the same model.
      hf_module: The transformers module of its output layer (`classifier`, `qa_outputs`).
      hf_pooler: Whether transformers builds that class with the pooler.
      outputs: The model outputs an export serves -> `PER_TOKEN`, `PER_EXAMPLE`, `CLASSES` or
        `SCORES`, in the signature's order.
      label_output: The export's output naming the best label of `probabilities` (`label` per
        example, `labels` per token), or None for a head without labels.
      problem_type: transformers' `problem_type` of the class, where it tells heads apart.
      choices: Whether the model's ids are [batch, choices, seq] (one pair per choice), not
        [batch, seq].
    """

    name: str
    model: type
    scope: str
    hf_architecture: str
    hf_module: str
    hf_pooler: bool
    outputs: dict
    label_output: str = None
    problem_type: str = None
    choices: bool = False

    @property
    def labels(self):
        """Whether the head's outputs are named labels (its width is the number of labels)."""
        return self.label_output is not None

    @property
    def width(self):
        """The fixed rows of `output_weights`, or None (the number of labels)."""
        return self.model.width

    def build(self, config, num_outputs, dtype=None):
        """The head's model for `config` with `num_outputs` rows of `output_weights`.

        Raises:
          ValueError: `num_outputs` is not the head's fixed width.
        """
        if self.width is None:
            return self.model(config, num_outputs, dtype=dtype)
        if num_outputs != self.width:
            raise ValueError(f"a {self.name} head has {self.width} outputs, got {num_outputs}")
        return self.model(config, dtype=dtype)

    def variable_names(self):
        """The head's two variables' Google names, in the original's order."""
        return [f"{self.scope}output_weights", f"{self.scope}output_bias"]


HEADS = (
    Head(
        "classifier",
        BertClassifier,
        "",
        "BertForSequenceClassification",
        "classifier",
        hf_pooler=True,
        outputs={"probabilities": CLASSES},
        label_output="label",
        problem_type="single_label_classification",
    ),
    Head(
        "regressor",
        BertRegressor,
        "",
        "BertForSequenceClassification",
        "classifier",
        hf_pooler=True,
        outputs={"scores": SCORES},
        problem_type="regression",
    ),
    Head(
        "multiple choice",
        BertMultipleChoice,
        "cls/multiple_choice/",
        "BertForMultipleChoice",
        "classifier",
        hf_pooler=True,
        outputs={"probabilities": CLASSES},
        choices=True,
    ),
    Head(
        "tagger",
        BertTagger,
        "cls/tagging/",
        "BertForTokenClassification",
        "classifier",
        hf_pooler=False,
        outputs={"probabilities": PER_TOKEN},
        label_output="labels",
    ),
    Head(
        "SQuAD span head",
        BertSquad,
        "cls/squad/",
        "BertForQuestionAnswering",
        "qa_outputs",
        hf_pooler=False,
        outputs={"start_logits": PER_TOKEN, "end_logits": PER_TOKEN},
    ),
)


def head_of_model(model):
    """The `Head` of a `BertWithHead` model, or None for another model."""
    for head in HEADS:
        if type(model) is head.model:
            return head
    return None


def head_of_checkpoint(shapes):
    """The head a Google checkpoint holds, and its number of outputs.

    A top-level output layer of one row is the regressor's (transformers' rule: one label is a
    regression), of more the classifier's.

    Args:
      shapes: The checkpoint's variable name -> shape.

    Returns:
      `(Head, num_outputs)`, or `(None, None)` for a checkpoint without a fine-tuning head.

    Raises:
      ValueError: The checkpoint holds two heads' variables.
    """
    found = {}
    for head in HEADS:
        weights, bias = head.variable_names()
        if weights in shapes and bias in shapes:
            width = shapes[bias][0]
            if head.width is None or width == head.width:
                found.setdefault(head.scope, []).append((head, width))
    if len(found) > 1:
        scopes = ", ".join(scope or "top level" for scope in found)
        raise ValueError(f"the checkpoint holds the output layers of several heads ({scopes})")
    if not found:
        return None, None
    # A width both the regressor and the classifier accept: the head with the fixed width.
    candidates = sorted(next(iter(found.values())), key=lambda hw: hw[0].width is None)
    return candidates[0]


def head_named(hf_architecture, problem_type=None, num_labels=None):
    """The head of a transformers class, as transformers tells its problem from the labels.

    Args:
      hf_architecture: The class name (`BertForSequenceClassification`, ...).
      problem_type: `config.json`'s `problem_type`, or None.
      num_labels: Its number of labels, or None.

    Returns:
      The `Head`, or None for a class without a fine-tuning head (`BertModel`, ...).

    Raises:
      ValueError: A `problem_type` no head computes.
    """
    heads = [head for head in HEADS if head.hf_architecture == hf_architecture]
    if len(heads) <= 1:
        return heads[0] if heads else None
    if problem_type is None:  # transformers: one label is a regression
        problem_type = "regression" if num_labels == 1 else "single_label_classification"
    for head in heads:
        if head.problem_type == problem_type:
            return head
    known = ", ".join(head.problem_type for head in heads)
    raise ValueError(f"problem_type {problem_type!r} is not supported: one of {known}")
