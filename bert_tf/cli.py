"""What the command-line tools share: a quiet TensorFlow start-up, absl start-up, and bad input
reported as one line.

Importing this module (every tool does, first) hides TensorFlow's C++ logs, the pages of start-up
notes about oneDNN, CUDA and CPU instructions, by setting `TF_CPP_MIN_LOG_LEVEL=3` unless the user
has set `TF_CPP_MIN_LOG_LEVEL`. The lines TensorFlow writes while its libraries load ignore that
level, so the tools drop those below it themselves (at 0 every line shows; at 3, the default,
only FATAL ones). A tool started by another one inherits the level and is as quiet.
"""

import _thread
import contextlib
import functools
import gc
import logging
import os
import re
import signal
import sys
import tempfile
import time

from absl import app

from bert_tf.errors import JobError

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # before TensorFlow is imported

# A C++ log line (`I0000 00:00:1795431512.186846    8941 port.cc:153] ...`: severity I, W or
# E), and the banner abseil prints before it is initialised.
_CPP_LOG_LINE = re.compile(rb"([IWE])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\] ")
_ABSL_BANNER = b"WARNING: All log messages before absl::InitializeLog"
_SEVERITY = {b"I": 0, b"W": 1, b"E": 2}


def _min_log_level():
    try:
        return int(os.environ["TF_CPP_MIN_LOG_LEVEL"])
    except ValueError:
        return 0


_LEVEL = _min_log_level()


def _hidden(line, level):
    """Whether a line written while TensorFlow loads is below the log level."""
    if line.startswith(_ABSL_BANNER):
        return level > 0
    match = _CPP_LOG_LINE.match(line)
    return bool(match) and _SEVERITY[match.group(1)] < level


@contextlib.contextmanager
def _without_cpp_log_lines(level):
    """Drops C++ log lines below `level` written to the process's stderr (file descriptor 2)
    in the block.

    While TensorFlow's libraries load, abseil logging is not initialised yet and writes every
    message to stderr whatever `TF_CPP_MIN_LOG_LEVEL` says; everything else written then (a
    Python warning, an import error) is passed on.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = b"".join(line for line in captured if not _hidden(line, level))
            if kept:
                sys.stderr.buffer.write(kept)
                sys.stderr.flush()


# TensorFlow is loaded here, where its start-up lines are filtered, before a tool's own imports
# (which may load it too). Scale mode's workers are spawned, so they do not inherit it.
with _without_cpp_log_lines(_LEVEL):
    import tensorflow  # noqa: E402, F401


def _not_tensorflow_info(record):
    """False for an INFO (or lower) record logged by TensorFlow's own Python modules."""
    return record.levelno >= logging.WARNING or f"{os.sep}tensorflow{os.sep}" not in record.pathname


if _LEVEL > 0:
    # TensorFlow's Python INFO lines (SavedModel and checkpoint internals, through absl's logger
    # or its own) go with its C++ ones; bert_tf's own progress messages stay.
    for _name in ("absl", "tensorflow"):
        logging.getLogger(_name).addFilter(_not_tensorflow_info)


# TensorFlow's errors of a file or a network (a gs:// path without a network or credentials, a
# file gone): the user's to act on, like Python's OSError. Other TensorFlow errors keep their
# traceback.
_TENSORFLOW_IO_ERRORS = tuple(
    getattr(tensorflow.errors, name)
    for name in (
        "NotFoundError",
        "PermissionDeniedError",
        "UnauthenticatedError",
        "FailedPreconditionError",
        "UnavailableError",
        "DeadlineExceededError",
        "DataLossError",
    )
)


def _one_line(error):
    """The message of an OSError or a TensorFlow I/O error, its lines joined."""
    message = error.message if isinstance(error, tensorflow.errors.OpError) else str(error)
    return " ".join(line.strip() for line in message.splitlines() if line.strip())


class _Signalled(SystemExit):
    """The SystemExit of SIGTERM (`_exit_on_signal`), status 128 + the signal's number."""


def _exit_on_signal(signum, frame):
    raise _Signalled(128 + signum)


def _redeliver_swallowed_signals(previous_hook, unraisable):
    """A `sys.unraisablehook`: Python runs a signal's handler between any two bytecodes, a
    garbage collector's callback or a `__del__` included, where the exception it raises is
    printed and dropped ("Exception ignored in ...") and the tool would run on. The signal is
    sent again a moment later from a thread of its own (started without waiting for it: a
    signal raised or awaited here would be handled here, in the hook, and dropped again);
    other unraisable exceptions go to `previous_hook`."""
    error = unraisable.exc_value
    if isinstance(error, _Signalled):
        signum = error.code - 128
    elif isinstance(error, KeyboardInterrupt):
        signum = signal.SIGINT
    else:
        previous_hook(unraisable)
        return
    _thread.start_new_thread(_send_signal_later, (signum,))


def _send_signal_later(signum, seconds=0.05):
    """Sends `signum` to this process after `seconds` (in a thread of its own)."""
    time.sleep(seconds)
    os.kill(os.getpid(), signum)


def _log_plainly():
    """Python logging as `LEVEL message` lines on stderr, in place of absl's handler (which
    prefixes each line with a date, a thread id and a source line), at absl's `--verbosity`
    (INFO by default; `--verbosity=-1` keeps warnings and errors only)."""
    from absl import logging as absl_logging
    from absl.logging import converter

    root = logging.getLogger()
    root.removeHandler(absl_logging.get_absl_handler())
    level = converter.absl_to_standard(absl_logging.get_verbosity())
    logging.basicConfig(level=level, format="%(levelname)s %(message)s")


_HELP_FLAGS = ("help", "h", "?", "helpshort", "helpfull")


def _help_asked(argv):
    """The help flag in `argv` (before a `--`), without its dashes, or None."""
    for arg in argv[1:]:
        if arg == "--":
            break
        name, _, value = arg.lstrip("-").partition("=")
        if arg.startswith("-") and name in _HELP_FLAGS and value.lower() not in ("false", "0"):
            return name
    return None


def _print_help(which):
    """The tool's docstring and its own flags (each with its help and default) on stdout, or with
    `--helpfull` every flag, absl's and TensorFlow's included."""
    app.usage(shorthelp=which != "helpfull", writeto_stdout=True)
    if which != "helpfull":
        print("\nTry --helpfull to get a list of all flags (absl's and TensorFlow's too).")


def run(main, flags_parser=app.parse_flags_with_usage):
    """Runs `main(argv)` as an absl program and exits with its status.

    TensorFlow is imported with this module (quietly, see the module doc). A `ValueError`
    (bert_tf's error for bad input: its message names the file, flag or variable) is printed as
    `error: <message>` on stderr with exit status 2, without a traceback; a `JobError`, an
    `OSError` (a file, a network) and TensorFlow's errors of files and networks (`gs://` without
    a network, a missing object) likewise, with exit status 1. SIGTERM exits with status 143
    through the tool's cleanup (`finally` blocks and context managers run: temporary files are
    deleted), where Python's default would end the process on the spot; SIGINT (Ctrl-C) with
    status 130 and the line `interrupted`, without a traceback. `--help` (or `-h`) prints the
    tool's docstring and its own flags, `--helpfull` every flag, and exits 0. bert_tf's log
    messages go to stderr as `LEVEL message` lines.

    Args:
      main: Takes the leftover argv; returns an exit status (None means 0).
      flags_parser: Parses the command line into the argv `main` takes (absl's `app.run`
        argument); absl's own rejects unknown flags.
    """

    help_asked = _help_asked(sys.argv)
    if help_asked:
        _print_help(help_asked)
        sys.exit(0)

    def checked_main(argv):
        _log_plainly()
        # What the imports made (TensorFlow's and Keras' objects) lives as long as the process:
        # out of the cyclic collector's reach, its collections while a model is traced walk only
        # the job's own objects.
        gc.freeze()
        signal.signal(signal.SIGTERM, _exit_on_signal)
        sys.unraisablehook = functools.partial(_redeliver_swallowed_signals, sys.unraisablehook)
        try:
            status = main(argv)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            status = 2
        except JobError as e:
            print(f"error: {e}", file=sys.stderr)
            status = 1
        except (OSError, *_TENSORFLOW_IO_ERRORS) as e:
            print(f"error: {_one_line(e)}", file=sys.stderr)
            status = 1
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            status = 128 + signal.SIGINT
        sys.exit(status or 0)

    app.run(checked_main, flags_parser=flags_parser)
