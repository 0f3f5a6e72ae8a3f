"""User paths, local or not: every file bert_tf reads or writes for a user goes through here.

A path with a scheme (`gs://bucket/...`, `hdfs://...`, `ram://...`) is handled by
`tf.io.gfile`, as the original does all its I/O through `tf.gfile`; TensorFlow is imported only
then. A local path uses Python's own `open`/`os`/`glob`, so the pretraining-data worker
processes, which read local corpora, never load TensorFlow (its start-up time and memory).

Outputs are written under a temporary name beside the final one and renamed into place
(`atomic_output`). On a local disk the rename is atomic: a reader sees the old file or the whole
new one. On GCS a rename is a copy and a delete, so the final name holds the complete object as
soon as it exists, but a reader listing the directory during the copy may also see the
temporary name (BUILD_NOTES.md, "Paths").
"""

import builtins
import contextlib
import errno
import glob as _glob
import logging
import os
import re
import shutil
import tempfile

logger = logging.getLogger(__name__)

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def _gfile(path):
    """`tf.io.gfile` for a path with a scheme, None for a local path."""
    if not _SCHEME.match(path):
        return None
    import tensorflow as tf  # only non-local paths need TensorFlow

    return tf.io.gfile


def open_file(path, mode="r"):
    """Opens a file as `open` does; text modes read and write UTF-8.

    Args:
      path: A local path or one with a scheme (`gs://...`).
      mode: "r", "w", "rb" or "wb" (and "a"/"ab" locally).

    Returns:
      A file object (a `tf.io.gfile.GFile` for a non-local path): iterable by lines, with
      `read`, `write`, `seek` and `tell`.

    Raises:
      FileNotFoundError: Reading a file that does not exist.
    """
    gfile = _gfile(path)
    if gfile is None:
        return builtins.open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"}))
    if "r" in mode and not gfile.exists(path):  # GFile itself fails only on the first read
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    return gfile.GFile(path, mode)


def read_json(path, object_only=True):
    """The JSON value of the file at `path` (local or `gs://...`).

    Args:
      path: The file.
      object_only: Whether the value must be a JSON object (a dict).

    Raises:
      ValueError: The file is not valid JSON, or (with `object_only`) not a JSON object; the
        message names it.
    """
    import json

    try:
        with open_file(path) as reader:
            data = json.load(reader)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    if object_only and not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    return data


def exists(path):
    """Whether a file or directory exists at `path`."""
    gfile = _gfile(path)
    return os.path.exists(path) if gfile is None else gfile.exists(path)


def isfile(path):
    """Whether `path` is a file (not a directory)."""
    gfile = _gfile(path)
    return os.path.isfile(path) if gfile is None else gfile.exists(path) and not gfile.isdir(path)


def isdir(path):
    """Whether `path` is a directory."""
    gfile = _gfile(path)
    return os.path.isdir(path) if gfile is None else gfile.isdir(path)


def original_line(raw):
    """A line (bytes) as the original's `tf.gfile` `readline` gives it: TensorFlow's line reader
    drops every "\\r" of a line, not only the one of "\\r\\n" (`hello\\rworld` is `helloworld`)."""
    return raw.replace(b"\r", b"")


_GLOB_CHARACTERS = re.compile(r"[*?[]")


def glob(pattern, sort=True):
    """The paths matching a glob pattern, sorted; else in the filesystem's order (that of the
    directory listing, which `tf.io.gfile.glob` also keeps).

    Local patterns match as `tf.io.gfile.glob` (the original's `tf.gfile.Glob`) does: `*` and
    `?` match names that start with a dot too, and `[^...]` is a negated set, as `[!...]`.
    """
    gfile = _gfile(pattern)
    if gfile is not None:
        matches = gfile.glob(pattern)
    else:
        matches = _glob.glob(pattern.replace("[^", "[!"), include_hidden=True)
    return sorted(matches) if sort else matches


def listdir(path):
    """The names of the entries of directory `path` (not full paths), sorted."""
    gfile = _gfile(path)
    return sorted(os.listdir(path) if gfile is None else gfile.listdir(path))


def size(path):
    """The size of a file in bytes."""
    gfile = _gfile(path)
    return os.path.getsize(path) if gfile is None else gfile.stat(path).length


def modified_time(path):
    """When the file at `path` was last written, in seconds since the epoch."""
    gfile = _gfile(path)
    return os.path.getmtime(path) if gfile is None else gfile.stat(path).mtime_nsec / 1e9


def absolute(path):
    """`path` made absolute if it is local (a remote path is already)."""
    return path if _gfile(path) is not None else os.path.abspath(path)


def makedirs(path):
    """Creates directory `path` and its parents; nothing if it exists."""
    gfile = _gfile(path)
    if gfile is None:
        os.makedirs(path, exist_ok=True)
    else:
        gfile.makedirs(path)


def rename(source, target):
    """Renames `source` to `target`, replacing `target` if it exists."""
    gfile = _gfile(source)
    if gfile is None:
        os.replace(source, target)
    else:
        gfile.rename(source, target, overwrite=True)


def remove(path):
    """Deletes the file `path`."""
    gfile = _gfile(path)
    if gfile is None:
        os.remove(path)
    else:
        gfile.remove(path)


def remove_tree(path):
    """Deletes the directory `path` and everything in it."""
    gfile = _gfile(path)
    if gfile is None:
        shutil.rmtree(path)
    else:
        gfile.rmtree(path)


# The process id in a temporary's name: `<name>.tmp-<pid>[<suffix>]`.
_TEMPORARY = re.compile(r"\.tmp-(\d+)")


def _running(pid):
    """Whether a process `pid` runs on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # another user's; no process id at all: left alone
        return True
    return True


def remove_abandoned(path, suffix=""):
    """Deletes the temporaries of `path` whose writer no longer runs: those a run killed before
    it could delete them (kill -9) left, named by `temporary_path` (`<path>.tmp-<pid>`, or
    `<stem>.tmp-<pid><suffix>` where `path` is `<stem><suffix>`; a checkpoint's files add their
    own endings).
    Only local paths are looked at, taken to be written on this machine: on a remote
    filesystem the writer may run on another.

    Args:
      path: The final name, local or not.
      suffix: An ending of `path` that its temporaries keep (see `atomic_output`).

    Returns:
      The paths removed; each is logged as a warning.
    """
    removed = abandoned_temporaries(path, suffix)
    for temporary in removed:
        logger.warning("Removing %s, left by a run that was killed", temporary)
        if os.path.isdir(temporary) and not os.path.islink(temporary):
            shutil.rmtree(temporary)
        else:
            os.remove(temporary)
    return removed


def abandoned_temporaries(path, suffix=""):
    """The temporaries of `path` whose writer no longer runs (see `remove_abandoned`), local
    paths only."""
    if _gfile(path) is not None:
        return []
    stem = path[: len(path) - len(suffix)]
    found = []
    for temporary in _glob.glob(f"{_glob.escape(stem)}.tmp-*{_glob.escape(suffix)}"):
        match = _TEMPORARY.match(os.path.basename(temporary), len(os.path.basename(stem)))
        if match and not _running(int(match.group(1))):
            found.append(temporary)
    return found


def is_temporary(path):
    """Whether `path` ends in a temporary's mark, `.tmp-<pid>` (`temporary_path`)."""
    mark = path.rfind(".tmp-")
    return mark >= 0 and _TEMPORARY.fullmatch(path, mark) is not None


def temporary_path(path, suffix=""):
    """The name this process writes `path` under before renaming it into place:
    `<stem>.tmp-<pid><suffix>` where `path` is `<stem><suffix>`. The temporaries of `path` that
    killed runs left are deleted first (`remove_abandoned`).

    Args:
      path: The final name, local or not.
      suffix: An ending of `path` the temporary keeps (Keras chooses a format by extension).

    Returns:
      The temporary path (nothing is created there).
    """
    remove_abandoned(path, suffix)
    return f"{path[: len(path) - len(suffix)]}.tmp-{os.getpid()}{suffix}"


@contextlib.contextmanager
def atomic_output(path, suffix=""):
    """Gives a temporary path beside `path`; renames it to `path` if the block completes.

    If the block raises, the temporary file is deleted, so an interrupted run never leaves a
    truncated file under the final name; the temporaries of `path` that killed runs left are
    deleted first (`temporary_path`). The parent directory is created if needed. What the
    rename guarantees depends on the filesystem (see the module doc).

    Args:
      path: The final file name, local or not.
      suffix: An ending of `path` the temporary name must keep (Keras chooses the format by
        the extension): `out/m.keras` with suffix ".keras" is written as `out/m.tmp-<pid>.keras`.

    Yields:
      The temporary path to write.
    """
    directory = os.path.dirname(path)
    if directory:
        makedirs(directory)
    tmp = temporary_path(path, suffix)
    try:
        yield tmp
        rename(tmp, path)
    finally:
        if exists(tmp):
            remove(tmp)


def _file_above(path):
    """The nearest existing ancestor of `path` that is a file, not a directory (None if every
    existing ancestor is a directory)."""
    parent = os.path.dirname(path.rstrip("/"))
    while parent and parent != path:
        if exists(parent):
            return None if isdir(parent) else parent
        path, parent = parent, os.path.dirname(parent)
    return None


def _check_writable(path, name):
    """Raises unless something can be made in the nearest existing directory at or above the
    local `path` (a directory made there and removed: permissions alone say nothing to root,
    nor of a read-only or virtual filesystem). Remote paths are left to their first write."""
    if _gfile(path) is not None:
        return
    directory = os.path.abspath(path)
    while not os.path.isdir(directory):
        directory = os.path.dirname(directory)
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".write-check-", dir=directory))
    except OSError as e:
        raise ValueError(f"{name}: cannot write in {directory} ({e.strerror})") from None


def check_output_path(path, name):
    """Raises unless a file can be written at `path`: before the work, not after it.

    Args:
      path: The file to write.
      name: What it is called in the message (the flag it came from).

    Raises:
      ValueError: `path` is a directory, a directory above it is a file, or the directory it
        would be made in cannot be written; the message names both.
    """
    if isdir(path):
        raise ValueError(f"{name}: {path} is a directory, not a file to write")
    blocking = _file_above(path)
    if blocking:
        raise ValueError(f"{name}: cannot write {path}: {blocking} is a file, not a directory")
    _check_writable(os.path.dirname(path) or ".", name)


def check_output_dir(path, name):
    """Raises unless `path` is, or can be made, a directory to write in: before the work.

    Args:
      path: The directory.
      name: What it is called in the message (the flag it came from).

    Raises:
      ValueError: `path` or a directory above it is a file, or the directory cannot be made or
        written; the message names it.
    """
    if exists(path) and not isdir(path):
        raise ValueError(f"{name}: {path} is a file, not a directory")
    blocking = _file_above(path)
    if blocking:
        raise ValueError(f"{name}: cannot make {path}: {blocking} is a file, not a directory")
    _check_writable(path, name)


def prepare_output_dir(path, name):
    """Checks that a directory of outputs can be written at `path` as a whole, and makes the
    temporary directory beside it (`temporary_path`) to write them into; `finish_output_dir`
    renames it into place, so that `path` holds all of the outputs or none. Local paths only: a
    directory cannot be renamed on GCS.

    Args:
      path: The directory to write; it must not exist, or be empty.
      name: What it is called in a message (the flag it came from).

    Returns:
      The temporary directory, made.

    Raises:
      ValueError: `path` is not local, is a file or a directory with files in it, or its parent
        cannot be written; the message names it.
    """
    if _gfile(path) is not None:
        raise ValueError(f"{name}: {path}: a directory of outputs is written on a local disk")
    check_output_dir(os.path.dirname(os.path.abspath(path)), name)
    if exists(path) and (not isdir(path) or os.listdir(path)):
        raise ValueError(f"{name}: {path} exists and is not an empty directory; nothing was written")
    tmp = temporary_path(path.rstrip("/"))
    makedirs(tmp)
    return tmp


def finish_output_dir(tmp, path):
    """Renames the temporary directory `prepare_output_dir` made to `path` (an empty directory
    there is replaced)."""
    path = path.rstrip("/")
    if isdir(path):
        os.rmdir(path)
    rename(tmp, path)


def expand_input_patterns(patterns, name="--input_file", sort=True):
    """The files matched by glob patterns, pattern by pattern, as the original's loop over
    `tf.gfile.Glob`. A path that names a file is that file, glob characters and all (so a list
    this function returned expands to itself). Unlike the original, spaces around a pattern are
    ignored, a pattern that matches nothing is an error, and a glob's matches leave out the
    temporaries of outputs being written or abandoned by a killed run (`<name>.tmp-<pid>`, see
    `is_temporary`), with a warning: `train.tfrecord-*` would otherwise read a half-written
    shard.

    Args:
      patterns: A comma-separated string of glob patterns, or a list of them.
      name: What the patterns are called in an error message (the flag they came from).
      sort: Each pattern's matches sorted (the same list on every machine of a training job);
        False: in the filesystem's order, unsorted, as `tf.gfile.Glob` gives them, which the
        original's create_pretraining_data reads in (the order decides which documents follow
        which, and so its examples).

    Raises:
      ValueError: A pattern matches no file; the message names it.
    """
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    files = []
    for pattern in (p.strip() for p in patterns):
        if not pattern:
            continue
        is_glob = _GLOB_CHARACTERS.search(pattern) is not None
        if is_glob and exists(pattern) and not isdir(pattern):
            matches = [pattern]
        else:
            matches = [path for path in glob(pattern, sort) if not isdir(path)]
            if is_glob:  # a file named outright is read, whatever its name
                for path in filter(is_temporary, matches):
                    logger.warning("%s: leaving out %s, a temporary of an unfinished write", name, path)
                matches = [path for path in matches if not is_temporary(path)]
        if not matches:
            if isdir(pattern):
                raise ValueError(f"{name}: {pattern!r} is a directory; give its files (e.g. {pattern}/*)")
            raise ValueError(f"{name}: {pattern!r} matches no file")
        files.extend(matches)
    if not files:
        raise ValueError(f"{name}: no input files given")
    return files
