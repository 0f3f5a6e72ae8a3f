"""GLUE's metrics (`bert_tf.tasks.classifier.metrics`) against scikit-learn's and SciPy's on the
same random predictions, ties and degenerate cases included."""

import warnings

import numpy as np
import pytest
import scipy.stats
import sklearn.metrics

from bert_tf.tasks.classifier import metrics

pytestmark = pytest.mark.usefixtures("scipy_sees_no_jax")


def _random_cases():
    rng = np.random.default_rng(59)
    for n in (2, 3, 17, 500):
        yield rng.integers(0, 2, n), rng.integers(0, 2, n)
    # Mostly right, as a trained model's.
    labels = rng.integers(0, 2, 300)
    yield np.where(rng.random(300) < 0.85, labels, 1 - labels), labels


@pytest.mark.parametrize("case", range(5))
def test_classification_metrics_are_sklearns(case):
    predictions, labels = list(_random_cases())[case]
    assert metrics.accuracy(predictions, labels) == pytest.approx(
        sklearn.metrics.accuracy_score(labels, predictions), abs=1e-6
    )
    assert metrics.f1(predictions, labels) == pytest.approx(
        sklearn.metrics.f1_score(labels, predictions), abs=1e-6
    )
    assert metrics.matthews_correlation(predictions, labels) == pytest.approx(
        sklearn.metrics.matthews_corrcoef(labels, predictions), abs=1e-6
    )


def test_degenerate_classifications_give_sklearns_values():
    ones, zeros, mixed = np.ones(6, int), np.zeros(6, int), np.array([0, 1, 1, 0, 1, 0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn warns where a score is ill-defined
        for predictions, labels in (
            (ones, ones),
            (zeros, zeros),
            (zeros, mixed),
            (mixed, ones),
            (ones, zeros),
        ):
            assert metrics.f1(predictions, labels) == sklearn.metrics.f1_score(labels, predictions)
            assert metrics.matthews_correlation(predictions, labels) == sklearn.metrics.matthews_corrcoef(
                labels, predictions
            )
    assert metrics.f1(zeros, zeros) == 0.0 and metrics.matthews_correlation(ones, ones) == 0.0


def test_correlations_are_scipys_with_ties():
    rng = np.random.default_rng(7)
    for n in (2, 5, 40, 1000):
        labels = rng.integers(0, 6, n) * 1.0  # STS-B-like scores with many ties
        predictions = np.round(labels + rng.normal(0, 1.5, n), 1)  # ties too
        assert metrics.pearson(predictions, labels) == pytest.approx(
            scipy.stats.pearsonr(predictions, labels)[0], abs=1e-6
        )
        assert metrics.spearmanr(predictions, labels) == pytest.approx(
            scipy.stats.spearmanr(predictions, labels)[0], abs=1e-6
        )
    values = rng.integers(0, 4, 30)
    np.testing.assert_allclose(metrics.average_ranks(values), scipy.stats.rankdata(values), atol=0)
    # Large and tiny scales, where naive sums of squares lose digits or overflow.
    for scale in (1e-200, 1e150):
        x, y = rng.normal(size=50) * scale, rng.normal(size=50) * scale
        assert metrics.pearson(x, y) == pytest.approx(scipy.stats.pearsonr(x, y)[0], abs=1e-6)


def test_constant_scores_give_nan_as_scipy():
    constant, varying = np.full(5, 2.5), np.arange(5.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SciPy warns that the input is constant
        assert np.isnan(scipy.stats.pearsonr(constant, varying)[0])
        assert np.isnan(scipy.stats.spearmanr(varying, constant)[0])
    assert np.isnan(metrics.pearson(constant, varying)) and np.isnan(metrics.spearmanr(varying, constant))


def test_each_task_reports_glues_metrics_under_run_glues_names():
    predictions, labels = np.array([1, 0, 1, 1]), np.array([1, 0, 0, 1])
    assert list(metrics.glue_metrics("CoLA", predictions, labels)) == ["matthews_correlation"]
    for task in ("mrpc", "qqp"):
        assert list(metrics.glue_metrics(task, predictions, labels)) == ["f1", "accuracy"]
    for task in ("sst2", "mnli", "mnli-mm", "qnli", "rte", "wnli", "xnli", "tsv"):
        assert metrics.glue_metrics(task, predictions, labels) == {"accuracy": 0.75}
    scores = np.array([0.5, 4.0, 3.2, 1.0])
    assert list(metrics.glue_metrics("stsb", scores, labels * 5.0)) == ["pearson", "spearmanr"]
    assert list(metrics.glue_metrics("csv", scores, labels, is_regression=True)) == ["pearson", "spearmanr"]
    with pytest.raises(ValueError, match=r"must be vectors of one length"):
        metrics.accuracy(predictions, labels[:3])
