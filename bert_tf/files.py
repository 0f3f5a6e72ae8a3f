"""User paths: input globs, and output files that are complete or absent (temporary name, then rename)."""

import contextlib
import glob as _glob_module
import os


@contextlib.contextmanager
def atomic_output(path, suffix=""):
    """Gives a temporary path beside `path`; renames it to `path` if the block completes.

    If the block raises, the temporary file is deleted, so an interrupted run never leaves a
    truncated file under the final name. The parent directory is created if needed.

    Args:
      path: The final file name.
      suffix: An ending of `path` the temporary name must keep (Keras chooses the format by
        the extension): `out/m.keras` with suffix ".keras" is written as `out/m.tmp-<pid>.keras`.

    Yields:
      The temporary path to write.
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path[: len(path) - len(suffix)]}.tmp-{os.getpid()}{suffix}"
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def expand_input_patterns(input_file):
    """The files matched by a comma-separated list of glob patterns, in the original's order.

    Raises:
      ValueError: A pattern matches no file; the message names it.
    """
    files = []
    for pattern in input_file.split(","):
        pattern = pattern.strip()
        if not pattern:
            continue
        matches = sorted(_glob_module.glob(pattern))
        matches = [path for path in matches if os.path.isfile(path)]
        if not matches:
            raise ValueError(f"--input_file: {pattern!r} matches no file")
        files.extend(matches)
    if not files:
        raise ValueError("--input_file: no input files given")
    return files


# Minimal local-path helpers; replaced by the gfile-aware versions of issue 18's cloud-path work.
def exists(path):
    return os.path.exists(path)


def glob(pattern):
    return _glob_module.glob(pattern)


def makedirs(path):
    os.makedirs(path, exist_ok=True)


def remove(path):
    os.remove(path)


def rename(source, target):
    os.replace(source, target)
