"""What the command-line tools share: a quiet TensorFlow start-up, absl start-up, and bad input
reported as one line.

Importing this module (every tool does, first) hides TensorFlow's C++ logs, the pages of start-up
notes about oneDNN, CUDA and CPU instructions, by setting `TF_CPP_MIN_LOG_LEVEL=3`, unless the
user has set `TF_CPP_MIN_LOG_LEVEL` (then nothing here filters anything).
"""

import contextlib
import os
import re
import sys
import tempfile

from absl import app

_QUIET = "TF_CPP_MIN_LOG_LEVEL" not in os.environ
if _QUIET:
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"  # before TensorFlow is imported; FATAL still shows

# A C++ log line of any severity but FATAL (`I0000 00:00:1795431512.186846    8941 port.cc:153] ...`),
# and the banner abseil prints before it is initialised.
_CPP_LOG_LINE = re.compile(
    rb"[IWE]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\] |WARNING: All log messages before absl::InitializeLog"
)


@contextlib.contextmanager
def _without_cpp_log_lines():
    """Drops C++ log lines written to the process's stderr (file descriptor 2) in the block.

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
            kept = b"".join(line for line in captured if not _CPP_LOG_LINE.match(line))
            if kept:
                sys.stderr.buffer.write(kept)
                sys.stderr.flush()


class JobError(Exception):
    """A job stopped for a reason the user can act on (e.g. a NaN loss): one line, exit status 1."""


def run(main, flags_parser=app.parse_flags_with_usage):
    """Runs `main(argv)` as an absl program and exits with its status.

    TensorFlow is imported before `main` runs (quietly, see the module doc). A `ValueError`
    (bert_tf's error for bad input: its message names the file, flag or variable) is printed as
    `error: <message>` on stderr with exit status 2, without a traceback; a `JobError`
    likewise, with exit status 1.

    Args:
      main: Takes the leftover argv; returns an exit status (None means 0).
      flags_parser: Parses the command line into the argv `main` takes (absl's `app.run`
        argument); absl's own rejects unknown flags.
    """

    def checked_main(argv):
        if _QUIET:
            with _without_cpp_log_lines():
                import tensorflow  # noqa: F401  (loaded here, where its start-up lines are dropped)
        try:
            status = main(argv)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            status = 2
        except JobError as e:
            print(f"error: {e}", file=sys.stderr)
            status = 1
        sys.exit(status or 0)

    app.run(checked_main, flags_parser=flags_parser)
