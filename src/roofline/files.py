"""Reading the files users give (machine TOML, model config.json, profiles, traces): one reader
that refuses what is not a regular file (a FIFO would block forever, /dev/zero never ends), caps
the size it reads, and turns every read or decode failure into one line naming the file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from roofline.errors import RooflineError

MAX_INPUT_BYTES = 256 * 2**20  # 256 MiB: a profiler trace can be large; a config or machine file never is


def read_text(path, what: str, field: str, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of ``path`` (a ``what`` file), or a RooflineError naming it."""
    p = Path(path)
    try:
        info = os.stat(p)  # follows a symlink: what it points at must be a regular file too
    except OSError as exc:
        raise RooflineError(f"cannot read {what} {str(p)!r}: {exc.strerror}", field=field) from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file (a FIFO, socket or device)"
        raise RooflineError(f"{what} {str(p)!r} is {kind}", field=field)
    if info.st_size > max_bytes:
        raise RooflineError(f"{what} {str(p)!r} is {info.st_size:,} bytes, more than the {max_bytes:,} read",
                            field=field)
    try:
        with open(p, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise RooflineError(f"cannot read {what} {str(p)!r}: {exc.strerror}", field=field) from None
    if len(data) > max_bytes:
        raise RooflineError(f"{what} {str(p)!r} is more than the {max_bytes:,} bytes read", field=field)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise RooflineError(f"{what} {str(p)!r} is not a UTF-8 text file", field=field) from None
