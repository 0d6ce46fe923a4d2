"""Reading the files users give (machine TOML, model config.json, profiles, traces): one reader
that refuses what is not a regular file (a FIFO would block forever, /dev/zero never ends), caps
the size it reads, and turns every read or decode failure into one line naming the file."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import stat
import tempfile
import threading
from pathlib import Path
from typing import Callable

from roofline.errors import RooflineError

MAX_INPUT_BYTES = 256 * 2**20  # 256 MiB: a profiler trace can be large; a config or machine file never is


def read_text(path, what: str, field: str, max_bytes: int = MAX_INPUT_BYTES, gzipped: bool = False) -> str:
    """The UTF-8 text of ``path`` (a ``what`` file), or a RooflineError naming it. With ``gzipped``
    a gzip file (torch.profiler writes one for a path ending in .gz) is read through, its text
    capped at ``max_bytes`` too."""
    if not str(path).strip():  # Path("") is ".", the working directory: name what was given instead
        raise RooflineError(f"{what} {str(path)!r}: an empty path; give a file's name", field=field)
    if "\x00" in str(path):  # os.stat raises ValueError on it: no file name can hold a NUL
        raise RooflineError(f"{what} {str(path)!r}: a path cannot contain a NUL character", field=field)
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
    if gzipped and data[:2] == b"\x1f\x8b":
        import gzip
        import zlib

        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as g:
                data = g.read(max_bytes + 1)
        except (OSError, EOFError, zlib.error) as exc:
            raise RooflineError(f"{what} {str(p)!r} is a gzip file that cannot be read through ({exc})", field=field) from None
        if len(data) > max_bytes:
            raise RooflineError(f"{what} {str(p)!r} holds more than the {max_bytes:,} bytes read", field=field)
    try:
        return data.decode("utf-8-sig")  # a byte-order mark (a file saved on Windows) is not content
    except UnicodeDecodeError:
        raise RooflineError(f"{what} {str(p)!r} is not a UTF-8 text file", field=field) from None


def json_failure(exc: BaseException) -> str:
    """Why json.loads failed, in words (not Python's class names): too deep, or a number too long."""
    if isinstance(exc, RecursionError):
        return "nested deeper than the reader follows"
    text = str(exc)
    if "digits" in text or "integer string conversion" in text:
        return "a number with thousands of digits"
    return text.split(";")[0][:120] or type(exc).__name__


MAX_FILE_INT = 2**63 - 1  # TOML's integers are 64-bit (toml.io); JSON's readers in C, Rust and JS hold no more


def check_file_numbers(doc, what: str, field: str):
    """``doc`` (a parsed JSON or TOML file) if every integer in it fits 64 bits, else a RooflineError
    naming the key and the value: Python reads 10**400 as an int, and the first float() it meets
    overflows (hidden_size = 10**400 was a traceback in every command taking --model). A float past
    the largest is already inf, which the validators that read it refuse by name."""
    stack = [(doc, "")]
    while stack:  # iterative: a file nested thousands deep was parsed, and must not overflow the stack here
        node, where = stack.pop()
        if isinstance(node, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(node))
        elif isinstance(node, int) and not isinstance(node, bool) and abs(node) > MAX_FILE_INT:
            from roofline.errors import big_int

            got = f"{node:,}" if abs(node) < 10**24 else big_int(node)
            raise RooflineError(f"{what}: key {where or '(top level)'} holds {got}, beyond the 64-bit "
                                f"integers a file's number is read as (at most {MAX_FILE_INT:,})", field=field)
    return doc


# ---------------------------------------------------------------------------------------------
# Writing: -o outputs and profiles
# ---------------------------------------------------------------------------------------------

TEMP_SUFFIX = ".tmp"


def write_atomically(path, write: Callable[[str], None]) -> Path:
    """Write ``path`` through ``write(temporary_path)`` so that a reader sees the old file or the
    whole new one, never half: a temporary file in the same folder, flushed to disk, renamed over
    the target and the folder flushed. A symlinked ``path`` stays a link (its target is replaced);
    an existing file keeps its permission bits (a new one gets 0666 less the umask, as open()
    gives); an interruption (an exception, Ctrl-C, SIGTERM) removes the temporary file, and
    temporary files that killed writers left next to the target are removed first. Returns the
    path written (the link's target for a link)."""
    target = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    _remove_stale_temporaries(folder, target.name)
    with _terminate_raises():
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=TEMP_SUFFIX, dir=folder)
        except OSError as exc:  # name the file asked for, not the temporary one
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        try:
            os.close(fd)
            write(tmp)
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, target)
        except OSError as exc:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        _fsync_directory(folder)  # the rename itself survives a power cut
    return target


def write_text_atomically(path, text: str) -> Path:
    """``text`` as UTF-8 into ``path`` through write_atomically."""
    return write_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def _remove_stale_temporaries(folder: Path, name: str) -> None:
    """Temporary files ``.{name}.{pid}.*.tmp`` whose writer process is gone (killed with SIGKILL,
    or by a power cut) are removed; a live writer's are left alone."""
    prefix = f".{name}."
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for entry in entries:
        if not (entry.startswith(prefix) and entry.endswith(TEMP_SUFFIX)):
            continue
        pid = entry[len(prefix):].split(".", 1)[0]
        if pid.isdigit() and pid.isascii() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(folder / entry)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # someone else's process, or not a pid we can ask about: leave its file
    return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # a platform that cannot open directories (Windows): the rename is all we have
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def _terminate_raises():
    """While a file is written, SIGTERM raises SystemExit (exit status 143) so that the temporary
    file is removed as for Ctrl-C; the previous handler is restored afterwards. Only in the main
    thread, where Python delivers signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
