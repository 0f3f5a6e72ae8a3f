"""`Task`: what a job hands the trainer (`bert_tf.training.step`, `loop`, `Runner`), as a
`typing.Protocol`: a model and its loss, written as sums the step reduces over the global batch.

The loss is `sum_k numerators[k] / (denominators[k] + loss_epsilons[k])`, each numerator and
denominator summed over every replica's rows before the division (so that the loss is the
global batch's, whatever the replicas), as `bert_tf.training.step` explains. Each metric is a
`(numerator, denominator)` pair summed the same way over the evaluated batches.
"""

from typing import Protocol, runtime_checkable


@runtime_checkable
class Task(Protocol):
    """A job's model and loss (module docstring), e.g. `bert_tf.tasks.classifier.task.ClassifierTask`.

    Attributes:
      model: The Keras model, called on the dict of a batch's features (`training=True` to
        train), returning a dict of outputs. A variable the loss does not reach must not be
        trainable (`bert.pooler.trainable = False`), as the original's optimizer leaves it alone.
      metric_names: The names of `loss_terms`' metrics, in the order they are logged.
      loss_epsilons: One float per loss term, added to its denominator (the masked LM's 1e-5).
      eval_keys: Optional: metric name -> its name in `eval_results.txt` (`accuracy` ->
        `eval_accuracy`); the others keep theirs.
    """

    model: object
    metric_names: tuple
    loss_epsilons: tuple

    def loss_denominators(self, batch):
        """The loss terms' denominators on this replica's `batch` (float32 scalars)."""

    def loss_terms(self, outputs, batch):
        """The loss terms' numerators and the metrics on this replica's batch.

        Args:
          outputs: The model's outputs on `batch`.
          batch: The replica's batch of features.

        Returns:
          `([numerator, ...], {metric name: (numerator, denominator)})`, float32 scalars.
        """
