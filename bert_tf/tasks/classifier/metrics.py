"""GLUE's metrics of a task's predictions (NumPy only), under the names Hugging Face's `run_glue`
reports them (`eval_results.txt` adds the original's `eval_` prefix).

| task | metrics |
|---|---|
| cola | `matthews_correlation` |
| mrpc, qqp | `f1` (of class 1), `accuracy` |
| stsb, and any regression | `pearson`, `spearmanr` |
| the others (sst2, mnli, mnli-mm, qnli, rte, wnli, xnli, tsv/csv) | `accuracy` |

Degenerate inputs give what scikit-learn and SciPy give: F1 is 0 when class 1 is neither
predicted nor true (scikit-learn's `zero_division` default), the Matthews correlation 0 when the
predictions or the labels are all one class; Pearson and Spearman are NaN when either side is
constant (SciPy's `pearsonr`, `spearmanr`).
"""

import numpy as np

# The metric names of the tasks that report more than accuracy.
TASK_METRICS = {
    "cola": ("matthews_correlation",),
    "mrpc": ("f1", "accuracy"),
    "qqp": ("f1", "accuracy"),
    "stsb": ("pearson", "spearmanr"),
}
REGRESSION_METRICS = ("pearson", "spearmanr")


def _arrays(predictions, labels):
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    if predictions.shape != labels.shape or predictions.ndim != 1:
        raise ValueError(
            f"predictions {predictions.shape} and labels {labels.shape} must be vectors of one length"
        )
    if len(labels) == 0:
        raise ValueError("no predictions to score")
    return predictions, labels


def accuracy(predictions, labels):
    """The fraction of `predictions` equal to `labels` (class ids).

    Args:
      predictions: [n] predicted class ids.
      labels: [n] true class ids.

    Returns:
      A float in [0, 1].

    Raises:
      ValueError: The arrays are not vectors of one non-zero length.
    """
    predictions, labels = _arrays(predictions, labels)
    return float(np.mean(predictions == labels))


def _confusion(predictions, labels):
    """(true positives, false positives, false negatives, true negatives) of class 1, as floats."""
    predicted, true = predictions == 1, labels == 1
    return tuple(
        float(np.sum(a & b)) for a, b in ((predicted, true), (predicted, ~true), (~predicted, true))
    ) + (float(np.sum(~predicted & ~true)),)


def f1(predictions, labels):
    """The F1 score of class 1 (binary tasks: MRPC's paraphrase, QQP's duplicate).

    Args:
      predictions: [n] predicted class ids.
      labels: [n] true class ids.

    Returns:
      `2 tp / (2 tp + fp + fn)`; 0 when class 1 is neither predicted nor true.

    Raises:
      ValueError: The arrays are not vectors of one non-zero length.
    """
    tp, fp, fn, _ = _confusion(*_arrays(predictions, labels))
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0


def matthews_correlation(predictions, labels):
    """The Matthews correlation coefficient of binary predictions (CoLA's metric).

    Args:
      predictions: [n] predicted class ids (0 or 1).
      labels: [n] true class ids (0 or 1).

    Returns:
      `(tp tn - fp fn) / sqrt((tp + fp)(tp + fn)(tn + fp)(tn + fn))` in [-1, 1]; 0 when a
      factor of the denominator is 0 (all predictions or all labels one class).

    Raises:
      ValueError: The arrays are not vectors of one non-zero length.
    """
    tp, fp, fn, tn = _confusion(*_arrays(predictions, labels))
    denominator = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)
    return float((tp * tn - fp * fn) / np.sqrt(denominator)) if denominator else 0.0


def pearson(predictions, labels):
    """Pearson's correlation coefficient of two score vectors (in float64).

    Args:
      predictions: [n] predicted scores.
      labels: [n] true scores.

    Returns:
      A float in [-1, 1]; NaN when either vector is constant or n < 2.

    Raises:
      ValueError: The arrays are not vectors of one non-zero length.
    """
    x, y = (a.astype(np.float64) for a in _arrays(predictions, labels))
    x, y = x - x.mean(), y - y.mean()
    # Each side scaled by its largest deviation first, so the sums neither overflow nor underflow.
    scales = np.max(np.abs(x)), np.max(np.abs(y))
    if len(x) < 2 or not scales[0] or not scales[1]:
        return float("nan")
    x, y = x / scales[0], y / scales[1]
    return float(np.clip(np.dot(x, y) / np.sqrt(np.dot(x, x) * np.dot(y, y)), -1.0, 1.0))


def average_ranks(values):
    """The 1-based ranks of `values`, tied values sharing the mean of their ranks.

    Args:
      values: A vector.

    Returns:
      [n] float64 ranks.
    """
    values = np.asarray(values)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    # Each run of equal values [start, end) gets the rank (start + 1 + end) / 2.
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], len(values)]
    ranks = np.empty(len(values), np.float64)
    ranks[order] = np.repeat((starts + 1 + ends) / 2.0, ends - starts)
    return ranks


def spearmanr(predictions, labels):
    """Spearman's rank correlation: Pearson's of the average ranks (ties share their mean rank).

    Args:
      predictions: [n] predicted scores.
      labels: [n] true scores.

    Returns:
      A float in [-1, 1]; NaN when either vector is constant or n < 2.

    Raises:
      ValueError: The arrays are not vectors of one non-zero length.
    """
    predictions, labels = _arrays(predictions, labels)
    return pearson(average_ranks(predictions), average_ranks(labels))


METRICS = {
    "accuracy": accuracy,
    "f1": f1,
    "matthews_correlation": matthews_correlation,
    "pearson": pearson,
    "spearmanr": spearmanr,
}


def metric_names(task_name, is_regression=False):
    """The names of `task_name`'s metrics (module docstring), in the order they are reported.

    Args:
      task_name: A `--task_name` (any case).
      is_regression: Whether the task predicts a score (tsv/csv with --task_type=regression).

    Returns:
      A tuple of keys of `METRICS`.
    """
    if is_regression:
        return REGRESSION_METRICS
    return TASK_METRICS.get(task_name.lower(), ("accuracy",))


def glue_metrics(task_name, predictions, labels, is_regression=False):
    """GLUE's metrics of `task_name` (module docstring).

    Args:
      task_name: A `--task_name` (any case).
      predictions: [n] predicted class ids, or scores for a regression.
      labels: [n] true class ids or scores.
      is_regression: Whether the task predicts a score (stsb is one whatever this says).

    Returns:
      `{name: float}`, e.g. `{"f1": ..., "accuracy": ...}` for MRPC.

    Raises:
      ValueError: The arrays are not vectors of one non-zero length.
    """
    return {name: METRICS[name](predictions, labels) for name in metric_names(task_name, is_regression)}
