"""What the command-line tools share: absl start-up, and bad input reported as one line."""

import sys

from absl import app


class JobError(Exception):
    """A job stopped for a reason the user can act on (e.g. a NaN loss): one line, exit status 1."""


def run(main):
    """Runs `main(argv)` as an absl program and exits with its status.

    A `ValueError` (bert_tf's error for bad input: its message names the file, flag or
    variable) is printed as `error: <message>` on stderr with exit status 2, without a traceback;
    a `JobError` likewise, with exit status 1.

    Args:
      main: Takes the leftover argv; returns an exit status (None means 0).
    """

    def checked_main(argv):
        try:
            status = main(argv)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            status = 2
        except JobError as e:
            print(f"error: {e}", file=sys.stderr)
            status = 1
        sys.exit(status or 0)

    app.run(checked_main)
