"""A one-line progress display for long jobs (stderr), with counts and a rate."""

import sys
import time


class Progress:
    """Prints `label: 1,234 docs | 5,678 instances | 4,321 instances/s` at most every 0.5 s.

    Args:
      label: What is being done.
      rate_of: The counter whose rate is shown.
      stream: Where to print; progress goes to stderr so stdout stays clean.
    """

    def __init__(self, label, rate_of, stream=None):
        self.label = label
        self.rate_of = rate_of
        self.stream = stream or sys.stderr
        self.counts = {}
        self._start = time.monotonic()
        self._last = 0.0
        self._interactive = self.stream.isatty()

    def update(self, **counts):
        self.counts.update(counts)
        now = time.monotonic()
        if now - self._last >= (0.5 if self._interactive else 10.0):
            self._last = now
            self._print("\r" if self._interactive else "")

    def done(self):
        self._print("\r" if self._interactive else "")
        if self._interactive:
            self.stream.write("\n")
        self.stream.flush()

    @property
    def elapsed(self):
        return time.monotonic() - self._start

    def _print(self, prefix):
        parts = [f"{value:,} {name}" for name, value in self.counts.items()]
        rate = self.counts.get(self.rate_of, 0) / max(self.elapsed, 1e-9)
        parts.append(f"{rate:,.0f} {self.rate_of}/s")
        line = f"{prefix}{self.label}: " + " | ".join(parts)
        self.stream.write(line if self._interactive else line + "\n")
        self.stream.flush()
