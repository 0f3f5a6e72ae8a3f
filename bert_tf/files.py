"""Output files that are complete or absent: written under a temporary name, then renamed."""

import contextlib
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
