"""Atomic writes: a temp file beside the target, renamed into place, so a crash or a kill at any
moment leaves the old file or the new one, never half of one. Every result file goes through here.
Each writer holds a lock on its temp file, so the next write of the same file removes the temp
files whose writer was killed (SIGKILL) and only those.

The `check_*` functions say, before any work, whether a path can be written at all (a folder
where a file is meant, a device, /proc, a file in the way of a folder): one TransitsimError line
instead of a traceback after minutes of simulation.
"""

import contextlib
import fcntl
import os
import signal
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from transitsim.base.errors import TransitsimError

MAX_NAME_BYTES = 200  # a file name plus our ".<name>.<random>.tmp" stays under the usual 255
NAME_MAX = 255  # bytes in one path component (Linux's ext4, xfs, btrfs, tmpfs)
PATH_MAX = 4096  # bytes in a whole path, its NUL included (Linux)

# The empty file a writability check makes and removes at once: a concurrent run into the same
# folder may see one for an instant (base/outfolder.py counts it as nobody's content).
PROBE_PREFIX = ".transitsim-probe."


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _nearest_existing(folder: Path) -> Path:
    """The folder itself or its closest ancestor that exists (what mkdir -p would start from)."""
    candidate = folder
    while not os.path.lexists(candidate) and candidate != candidate.parent:
        candidate = candidate.parent
    return candidate


def check_writable_folder(folder: Path | str, what: str = "output folder") -> Path:
    """Raise one line unless `folder` is (or can be made as) a folder this process can write in.

    Nothing is left behind: the probe file is removed, missing folders are not created."""
    folder = Path(folder)
    if "\x00" in str(folder):
        raise TransitsimError(f"{what}: the path holds a NUL character")
    _check_lengths(folder, what)
    if os.path.lexists(folder) and not folder.is_dir():
        raise TransitsimError(f"{what} {folder}: exists and is not a folder")
    start = _nearest_existing(folder.absolute())
    if not start.is_dir():
        raise TransitsimError(f"{what} {folder}: {start} is a file, not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=PROBE_PREFIX, dir=start)
    except OSError as exc:
        raise TransitsimError(
            f"{what} {folder}: cannot write in {start} ({_reason(exc)})"
        ) from None
    os.close(fd)
    os.unlink(probe)
    return folder


def _check_lengths(path: Path, what: str) -> None:
    """Refuse a path the file system cannot hold (ENAMETOOLONG): a component over NAME_MAX bytes
    or a whole path over PATH_MAX, which would otherwise fail only when the work is written."""
    whole = os.fsencode(path.absolute())
    if len(whole) >= PATH_MAX:
        raise TransitsimError(f"{what}: the path is {len(whole):,} bytes (at most {PATH_MAX - 1})")
    for part in path.parts:
        size = len(os.fsencode(part))
        if size > NAME_MAX:
            raise TransitsimError(
                f"{what}: the name {part[:40]}... is {size:,} bytes (a file system allows "
                f"{NAME_MAX} a name)"
            )


def check_writable_file(path: Path | str, what: str = "output file") -> Path:
    """Raise one line unless `path` can be replaced by a regular file (never a folder or a
    device: as root, renaming over /dev/null would replace the device itself)."""
    path = Path(path)
    _check_file_kind(path, what)
    check_writable_folder(path.parent, what=f"folder of {what}")
    return path


def _check_file_kind(path: Path, what: str) -> None:
    if path.name in ("", ".", ".."):
        raise TransitsimError(f"{what} {path}: not a file name")
    if len(path.name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        raise TransitsimError(f"{what}: file name longer than {MAX_NAME_BYTES} bytes")
    if "\x00" in str(path):
        raise TransitsimError(f"{what}: the path holds a NUL character")
    _check_lengths(path, what)
    if path.is_dir():
        raise TransitsimError(f"{what} {path}: is a folder, not a file")
    try:
        mode = os.stat(path).st_mode  # through a link: what a write would really reach
    except OSError:
        mode = None  # absent (or a dangling link, which the rename replaces)
    if mode is not None and not stat.S_ISREG(mode):
        raise TransitsimError(f"{what} {path}: exists and is not a regular file")


@contextlib.contextmanager
def atomic_path(path: Path | str, *, shared: bool = True, durable: bool = False) -> Iterator[Path]:
    """A temp path beside `path` (".<name>.<random>.tmp") that replaces it when the block ends
    without error; on error it is removed and `path` is left as it was. `shared` makes the file
    world-readable (mkstemp makes it private): results are meant to be shared, checkpoints not.
    `durable` also fsyncs the file before the rename and its folder after, so that the new file
    survives a power cut, not only a killed process (a few ms a write)."""
    path = Path(path)
    _check_file_kind(path, "output file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(path.parent, f".{path.name}.*.tmp")
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise TransitsimError(f"cannot write {path} ({_reason(exc)})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # held while it is written: never taken for a stale one
        with signals_raise():
            try:
                yield Path(tmp)
                if shared:
                    os.chmod(tmp, 0o644)
                try:
                    if durable:
                        os.fsync(fd)  # the file's data, whichever descriptor wrote it
                    os.replace(tmp, path)
                    if durable:
                        _fsync_folder(path.parent)
                except OSError as exc:  # its folder removed meanwhile, a full disk
                    raise TransitsimError(f"cannot write {path} ({_reason(exc)})") from None
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
    finally:
        os.close(fd)


def _fsync_folder(folder: Path) -> None:
    """Make a rename in `folder` durable (its entry is the folder's data)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_stale_temps(folder: Path | str, pattern: str) -> list[Path]:
    """Remove the temp files matching `pattern` in `folder` that no live writer holds (each
    writer holds its temp file's lock until it is renamed): what a SIGKILLed writer left behind.
    Returns what was removed."""
    removed = []
    for temp in Path(folder).glob(pattern):
        try:
            fd = os.open(temp, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # gone meanwhile, a link, or not ours to read
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live writer holds it
            temp.unlink(missing_ok=True)
            removed.append(temp)
        finally:
            os.close(fd)
    return removed


def write_text_atomic(path: Path | str, text: str) -> Path:
    """Write text atomically (UTF-8); returns the path."""
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt inside the block, so temporary files and
    staging folders are removed on the way out; only SIGKILL leaves one behind."""
    if threading.current_thread() is not threading.main_thread():
        yield  # handlers can only be set in the main thread
        return

    def handler(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)
