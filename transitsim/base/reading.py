"""Reading an input file, bounded: a regular file of at most `max_bytes`, or one line why not.

Opening a FIFO blocks until some writer appears, and a device such as /dev/zero never ends, so a
reader that trusts `open()` and `read()` hangs on them; a NUL in a path is a ValueError deep in
os.stat. Here the file is opened without blocking, checked to be a regular file, and read at
most `max_bytes + 1` bytes, so no path can hang or flood the reader that asks.
"""

import os
import stat
from pathlib import Path
from typing import BinaryIO

from transitsim.base.errors import TransitsimError


def open_regular_file(path: Path | str, max_bytes: int, what: str) -> BinaryIO:
    """`path` opened for reading, a regular file of at most `max_bytes` (to be read as a stream:
    its size is checked here, a file that grows meanwhile is the reader's to bound); else one
    TransitsimError line that names the path and `what` it was meant to be."""
    path = Path(path)
    if "\x00" in str(path):
        raise TransitsimError(f"{what} {str(path)!r}: the path holds a NUL character")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise TransitsimError(f"{path}: {what} not found") from None
    except OSError as exc:
        raise TransitsimError(f"{path}: cannot read {what} ({exc.strerror})") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise TransitsimError(f"{path}: is a folder, not a {what}")
        if not stat.S_ISREG(mode):
            raise TransitsimError(
                f"{path}: not a regular file (a pipe, device or socket), so not a {what}"
            )
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise TransitsimError(
                f"{path}: {size:,} bytes is too large for a {what} (at most {max_bytes:,})"
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_file(path: Path | str, max_bytes: int, what: str) -> bytes:
    """The bytes of `path`, a regular file of at most `max_bytes`; else one TransitsimError line
    that names the path and `what` it was meant to be ("background CSV", "JSONL log")."""
    with open_regular_file(path, max_bytes, what) as handle:
        try:
            raw = handle.read(max_bytes + 1)  # a file that grows while it is read
        except OSError as exc:
            raise TransitsimError(f"{path}: cannot read {what} ({exc.strerror})") from None
    if len(raw) > max_bytes:
        raise TransitsimError(f"{path}: more than {max_bytes:,} bytes is too large for a {what}")
    return raw
