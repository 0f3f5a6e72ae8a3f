"""Shared pytest set-up: the `slow` marker and the path to ../shared fixtures."""

import os

import pytest

SHARED_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
FIXTURES_DIR = os.path.join(SHARED_DIR, "fixtures")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes minutes; kept out of `make test` and CI")


@pytest.fixture(scope="session")
def fixtures_dir():
    """The fixtures made by the original code; the suite needs ../shared beside the repo."""
    if not os.path.isdir(FIXTURES_DIR):
        raise RuntimeError(f"{FIXTURES_DIR} is missing: clone bert_tf next to shared/")
    return FIXTURES_DIR
