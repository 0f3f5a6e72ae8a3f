"""Stopping a training run (or an evaluation) on SIGTERM or SIGINT at the next step, not the
next block.

The steps run inside graph calls of many steps each (a whole block of `iterations_per_loop`
steps on several workers), and Python runs a signal's handler only when a call returns, which
can take longer than a preempted machine's notice. `StopOnSignal` has the interpreter
write each signal's number to a pipe (`signal.set_wakeup_fd`, from the C handler, at once); a
thread reading the pipe sets a variable the step loop reads before every step, so the block
ends after the step in progress. The loop then saves a checkpoint of that step, and
`exit_if_stopped` ends the process as the signal would have: SIGTERM with status 143 (through
the tool's cleanup), SIGINT with KeyboardInterrupt.

Only where one process trains: a worker of several that stopped alone would leave the others
waiting in their next all-reduce. There the signal takes effect when the block's call returns.
"""

import logging
import os
import signal
import threading

logger = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopOnSignal:
    """A context in which SIGTERM and SIGINT set `stop_variable` (a boolean `tf.Variable` the
    step loop reads) instead of ending the process.

    Args:
      stop_variable: Set to True on the first signal.
      enabled: False makes the context a no-op (several workers; not the main thread, where
        Python cannot take signals).

    Attributes:
      signum: The signal received, or None.
    """

    def __init__(self, stop_variable, enabled=True):
        self.stop_variable = stop_variable
        self.enabled = enabled and threading.current_thread() is threading.main_thread()
        self.signum = None

    def _record(self, signum, frame):
        """The Python handler (it runs once the graph call returns): a second Ctrl-C is a
        KeyboardInterrupt at once, for a step too long to wait for."""
        if signum == signal.SIGINT and self.signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signum = self.signum or signum

    def _watch(self, reader):
        """Sets the variable when the interpreter's C handler writes a signal to the pipe."""
        while received := os.read(reader, 64):
            if any(signum in SIGNALS for signum in received):
                self.stop_variable.assign(True)

    def __enter__(self):
        if not self.enabled:
            return self
        self.stop_variable.assign(False)
        self._reader, self._writer = os.pipe()
        os.set_blocking(self._writer, False)
        # A signal the process ignores (SIGINT under `nohup` or `&`) stays ignored.
        watched = [signum for signum in SIGNALS if signal.getsignal(signum) is not signal.SIG_IGN]
        self._handlers = {signum: signal.signal(signum, self._record) for signum in watched}
        self._wakeup_fd = signal.set_wakeup_fd(self._writer, warn_on_full_buffer=False)
        self._thread = threading.Thread(target=self._watch, args=(self._reader,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        if not self.enabled:
            return
        signal.set_wakeup_fd(self._wakeup_fd)
        for signum, handler in self._handlers.items():
            signal.signal(signum, handler)
        os.close(self._writer)  # the thread reads the end of the pipe and returns
        self._thread.join()
        os.close(self._reader)

    def exit_if_stopped(self, message):
        """Ends the process as the signal received would have (after `message` is logged).

        Raises:
          SystemExit: On SIGTERM, with status 143.
          KeyboardInterrupt: On SIGINT.
        """
        if self.signum is None:
            return
        logger.warning("%s: %s", signal.Signals(self.signum).name, message)
        if self.signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + self.signum)
