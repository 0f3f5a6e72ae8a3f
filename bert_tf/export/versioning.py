"""TF Serving's versioned layout: `<export_dir>/<version>/`, each version complete or absent.

TF Serving watches `--model_base_path` and serves the subdirectories named by an integer (the
highest by default); other names are ignored. A version is written under such another name,
`<version>.tmp-<pid>`, and renamed into place once complete, so the server never sees it half
written and an interrupted export leaves no version behind.
"""

import contextlib
import logging
import os
import re

import tensorflow as tf

from bert_tf import errors, files

logger = logging.getLogger(__name__)


def existing_versions(export_dir):
    """The versions under `export_dir`, ascending (empty if it does not exist)."""
    if not tf.io.gfile.isdir(export_dir):
        return []
    names = (name.rstrip("/") for name in tf.io.gfile.listdir(export_dir))
    return sorted(int(name) for name in names if name.isdigit())


def next_version(export_dir):
    """One more than the highest version under `export_dir`, or 1: the one TF Serving will pick up."""
    return max(existing_versions(export_dir), default=0) + 1


def check_version(export_dir, version=None, overwrite=False):
    """The version to write under `export_dir`, checked before anything is written.

    Args:
      export_dir: The model's base directory (TF Serving's `--model_base_path`).
      version: The integer version to write; default `next_version(export_dir)`.
      overwrite: Whether an existing `version` may be replaced.

    Returns:
      The version.

    Raises:
      ValueError: `export_dir` (or a directory above it) is a file, `version` is not a
        non-negative integer, or it exists and `overwrite` is False; the message names the
        directory.
    """
    files.check_output_dir(export_dir, "--export_dir")
    if version is None:
        version = next_version(export_dir)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ValueError(f"the export version must be a non-negative integer, got {version!r}")
    path = os.path.join(export_dir, str(version))
    if tf.io.gfile.exists(path) and not overwrite:
        raise ValueError(f"{path} already exists; pass --overwrite to replace it or choose another version")
    return version


@contextlib.contextmanager
def versioned_directory(export_dir, version=None, overwrite=False):
    """Gives a temporary directory that becomes `<export_dir>/<version>` if the block completes.

    If the block raises, the temporary directory is deleted, and so is `export_dir` if this
    call created it: nothing is left behind. An overwritten version is moved aside, replaced,
    then deleted. A version that another export wrote while the block ran is replaced only
    with `overwrite`; otherwise the block's export is refused (deleted), not written over it.

    Args:
      export_dir: The model's base directory (TF Serving's `--model_base_path`).
      version: The integer version to write; default `next_version(export_dir)`.
      overwrite: Whether an existing `version` may be replaced.

    Yields:
      (the temporary directory, created empty; the final version directory).

    Raises:
      ValueError: As `check_version`, before anything is written; `export_dir` cannot be
        made; or the version appeared meanwhile (see above).
    """
    _recover_killed_exports(export_dir)
    version = check_version(export_dir, version, overwrite)
    final = os.path.join(export_dir, str(version))
    created_export_dir = not tf.io.gfile.exists(export_dir)
    tmp = files.temporary_path(final)
    try:
        tf.io.gfile.makedirs(tmp)
    except tf.errors.OpError as e:
        raise ValueError(f"--export_dir: cannot write in {export_dir} ({errors.reason(e)})") from None
    try:
        yield tmp, final
        if tf.io.gfile.exists(final) and not overwrite:
            raise ValueError(
                f"{final} was written by another export while this one ran; this one is not kept "
                "(rerun it for the next version, or pass --overwrite)"
            )
        if tf.io.gfile.exists(final):
            _replace(tmp, final, files.temporary_path(f"{final}.old"))
        else:
            tf.io.gfile.rename(tmp, final)
    finally:
        if tf.io.gfile.exists(tmp):
            tf.io.gfile.rmtree(tmp)
        if created_export_dir and not tf.io.gfile.listdir(export_dir):
            tf.io.gfile.rmtree(export_dir)


def _recover_killed_exports(export_dir):
    """Cleans up after exports killed (kill -9) under `export_dir` (local paths): a version that
    was moved aside to be replaced (`<version>.old.tmp-<pid>`) goes back to its name if the
    replacement never arrived, and is deleted otherwise; a half-written version
    (`<version>.tmp-<pid>`) is deleted."""
    if not os.path.isdir(export_dir):
        return
    for name in sorted(os.listdir(export_dir)):
        version = re.fullmatch(r"((\d+)(\.old)?)\.tmp-\d+", name)
        if not version:
            continue
        stem, final = (os.path.join(export_dir, version.group(i)) for i in (1, 2))
        if version.group(3) and not os.path.exists(final):
            aside = os.path.join(export_dir, name)
            if aside in files.abandoned_temporaries(stem):
                logger.warning("Restoring %s: an export that was replacing it was killed", final)
                os.rename(aside, final)
        else:
            files.remove_abandoned(stem)


def _replace(new, final, aside):
    """Renames directory `new` to `final`, which exists: the old one is moved `aside` meanwhile."""
    tf.io.gfile.rename(final, aside)
    try:
        tf.io.gfile.rename(new, final)
    except BaseException:
        tf.io.gfile.rename(aside, final)
        raise
    tf.io.gfile.rmtree(aside)
