"""A progress bar on stderr with no dependency: redrawn in place on a terminal, a line per stage
otherwise (logs stay short)."""

from __future__ import annotations

import sys
import time


class ProgressBar:
    def __init__(self, title: str, stream=None, width: int = 28):
        self.title, self.stream, self.width = title, stream or sys.stderr, width
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self.start = time.perf_counter()
        self.last_stage = None

    def __call__(self, fraction: float, label: str = "") -> None:
        fraction = min(max(float(fraction), 0.0), 1.0)
        elapsed = time.perf_counter() - self.start
        if self.tty:
            filled = int(round(fraction * self.width))
            bar = "#" * filled + "-" * (self.width - filled)
            self.stream.write(f"\r{self.title} [{bar}] {fraction:4.0%} {elapsed:4.0f}s {label[:48]:<48}")
        else:
            stage = label.split(" ")[0] if label else ""
            if stage == self.last_stage:
                return
            self.last_stage = stage
            self.stream.write(f"{self.title} {fraction:4.0%} {elapsed:4.0f}s {label}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
