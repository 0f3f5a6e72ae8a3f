"""bert_tf's error for a job that stopped, and what an error says, as one line for the messages
bert_tf writes around it."""

import re

# TensorFlow's decorations of an op's error: `{{function_node __wrapped__IteratorGetNext_...}}`
# before the message, ` [Op:IteratorGetNext] name: ` after it.
_OP_DECORATIONS = re.compile(r"\{\{function_node [^}]*\}\}\s*|\s*\[Op:.*$")


def reason(error):
    """The first line of what `error` says, for a message of the form "<what> (<reason>)".

    Args:
      error: An exception. A TensorFlow `OpError` is read from its `message`, without the
        op's decorations (`{{function_node ...}}`, `[Op:...]`).

    Returns:
      The first non-blank line of the message, stripped; the error's type name where the
      message is blank.
    """
    message = getattr(error, "message", None)
    if not isinstance(message, str):
        message = str(error)
    for line in message.splitlines():
        if line := _OP_DECORATIONS.sub("", line).strip():
            return line
    return type(error).__name__


class JobError(Exception):
    """A job stopped for a reason the user can act on (e.g. a NaN loss): the tools print it as
    one line and exit with status 1."""
