"""Shared pytest set-up: the `slow` marker, the path to ../shared fixtures, and the start-up of
the suite's processes (tests/site/sitecustomize.py)."""

import atexit
import gc
import os
import runpy
import sys

import pytest

# Every process the suite starts runs tests/site/sitecustomize.py first; this one runs it now,
# before anything imports TensorFlow.
SITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "site")
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (SITE_DIR, os.environ.get("PYTHONPATH")) if p)
runpy.run_path(os.path.join(SITE_DIR, "sitecustomize.py"))

SHARED_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
FIXTURES_DIR = os.path.join(SHARED_DIR, "fixtures")


# The test files that take longest, longest first. `make test`'s two workers take whole files
# in collection order (--dist loadfile --no-loadscope-reorder): a long file taken last would
# leave one worker running it alone. Measured with `pytest --durations=0` (BUILD_NOTES, Tests).
SLOWEST_FILES = (
    "test_run_pretraining.py",
    "test_export.py",
    "test_cli.py",
    "test_text_windowed.py",
    "test_classifier.py",
    "test_edge.py",
    "test_benchmarks.py",
    "test_training_distribution.py",
    "test_pretraining_beam.py",
    "test_run_squad.py",
    "test_multiple_choice.py",
    "test_training_step.py",
    "test_modeling.py",
    "test_graph_tokenizer.py",
    "test_tagging.py",
    "test_regression.py",
)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes minutes; kept out of `make test` and CI")
    config.addinivalue_line(
        "markers",
        "onednn_both: traces a graph saved to run elsewhere (SavedModel, LiteRT, ONNX); `make test` "
        "runs it once with TF_ENABLE_ONEDNN_OPTS=1 and once with =0, whatever the machine's default",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report says which oneDNN setting its process ran with (TensorFlow reads
    `TF_ENABLE_ONEDNN_OPTS` when it is imported: `make test` runs the `onednn_both` tests in one
    worker per setting)."""
    report = yield
    if report.failed:
        setting = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset (the machine's default)")
        report.sections.append(("oneDNN", f"TF_ENABLE_ONEDNN_OPTS={setting}"))
    return report


def pytest_collection_modifyitems(items):
    """The slowest files first (`SLOWEST_FILES`), the others after them in their own order."""
    rank = {name: position for position, name in enumerate(SLOWEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOWEST_FILES)))


@pytest.fixture
def scipy_sees_no_jax(monkeypatch):
    """tests/site/sitecustomize.py blocks `import jax` with a None in `sys.modules`, which
    SciPy's array-API checks read as a module (`getattr(None, "Array")`): absent, they pass."""
    if sys.modules.get("jax", False) is None:
        monkeypatch.delitem(sys.modules, "jax")


@pytest.fixture(scope="session")
def fixtures_dir():
    """The fixtures made by the original code; the suite needs ../shared beside the repo."""
    if not os.path.isdir(FIXTURES_DIR):
        raise RuntimeError(f"{FIXTURES_DIR} is missing: clone bert_tf next to shared/")
    return FIXTURES_DIR


def pytest_collection_finish(session):
    """Freezes what the imports made out of the cyclic collector's reach, as a tool does before
    its job (bert_tf.cli.run): the tests trace models in-process, as the tools' jobs do."""
    gc.freeze()


def pytest_sessionfinish(session, exitstatus):
    """A pytest-xdist worker whose session is over exits at once, with the session's status:
    its interpreter's teardown (every module, graph and traced function of the models the tests
    built, collected and freed one by one) makes nothing the suite reads, and the controller
    waits for it."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        atexit.register(_exit_now, int(exitstatus))


def _exit_now(status):
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
