"""A run's output folder written as one unit: every file goes into a private staging folder
beside it, which then takes the folder's place in one rename.

So a run killed at any moment leaves the previous run's outputs or the new run's, never a mix
(new summary beside an old report), and two runs into one folder at once each publish a whole
set: the last to finish wins. Each staging folder is locked (flock) by the process writing it;
the next run removes only staging folders whose lock is free, i.e. whose writer is dead, so one
run's cleanup never deletes another live run's files.

A folder holding anything but our outputs is refused before any work: replacing it would delete
the user's files.
"""

import contextlib
import ctypes
import errno
import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

from transitsim.base.atomic import (
    NAME_MAX,
    PROBE_PREFIX,
    check_writable_file,
    check_writable_folder,
    signals_raise,
)
from transitsim.base.errors import TransitsimError

_RENAME_EXCHANGE = 2  # linux/fs.h
STAGING_EXTRA = 16  # ".<name>.<8 random>.tmp" beside the folder: 14 bytes more, and a margin
_AT_FDCWD = -100


def _staging_prefix(out_dir: Path) -> str:
    return f".{out_dir.name}."


def check_output_folder(out_dir: Path | str, owned: Collection[str]) -> Path:
    """Raise one line unless out_dir can receive a run's outputs: writable, not the current
    folder, and holding nothing but files named in `owned` (an earlier run's outputs)."""
    out_dir = Path(out_dir)
    check_writable_folder(out_dir)
    size = len(os.fsencode(out_dir.absolute().name))
    if size > NAME_MAX - STAGING_EXTRA:
        raise TransitsimError(
            f"output folder: the name {out_dir.absolute().name[:40]}... is {size:,} bytes (at most "
            f"{NAME_MAX - STAGING_EXTRA}: its staging folder beside it adds {STAGING_EXTRA})"
        )
    resolved = out_dir.resolve()
    if resolved == Path.cwd().resolve() or resolved in Path.cwd().resolve().parents:
        raise TransitsimError(
            f"output folder {out_dir}: is the current folder (or holds it): name a folder of "
            "its own for the outputs"
        )
    check_writable_folder(resolved.parent, what=f"folder of {out_dir}")
    if out_dir.is_dir():
        foreign = sorted(
            p.name + ("/" if p.is_dir() else "")
            for p in out_dir.iterdir()
            # a concurrent run's probe or temp file may vanish between listing and looking:
            # only a name not ours, or a folder under our name, is someone else's content
            if not (_is_ours(p.name, owned) or p.name.startswith(PROBE_PREFIX)) or p.is_dir()
        )
        if foreign:
            shown = ", ".join(foreign[:3]) + (
                f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
            )
            raise TransitsimError(
                f"output folder {out_dir}: holds files that are not transitsim outputs "
                f"({shown}); a run replaces the whole folder, so give an empty or new one"
            )
    return out_dir


def _is_ours(name: str, owned: Collection[str]) -> bool:
    """An output name, or the temp file of one (left by an older transitsim that was killed)."""
    return name in owned or any(
        name.startswith(f".{own}.") and name.endswith(".tmp") for own in owned
    )


@contextlib.contextmanager
def _locked(fd: int, blocking: bool = True) -> Iterator[bool]:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        yield False
        return
    try:
        yield True
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def _parent_locked(target: Path) -> Iterator[None]:
    """Hold the lock of target's parent folder: staging folders appear, vanish and are
    published there by one process at a time."""
    fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with _locked(fd):
            yield
    finally:
        os.close(fd)


def remove_stale_staging(out_dir: Path) -> None:
    """Staging folders of `out_dir` whose writer died (their lock is free); call it holding
    the parent's lock."""
    parent = out_dir.resolve().parent
    if not parent.is_dir():
        return
    for staging in parent.glob(f"{_staging_prefix(out_dir)}*.tmp"):
        try:
            fd = os.open(staging, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue  # gone meanwhile, or not a folder
        try:
            with _locked(fd, blocking=False) as free:
                if free:
                    shutil.rmtree(staging, ignore_errors=True)
        finally:
            os.close(fd)


def _exchange(staging: Path, target: Path) -> bool:
    """Swap two folders in one step (Linux renameat2); False where the system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    result = renameat2(
        _AT_FDCWD, os.fsencode(staging), _AT_FDCWD, os.fsencode(target), _RENAME_EXCHANGE
    )
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(target))


def _publish(staging: Path, out_dir: Path) -> None:
    """Put the staging folder in out_dir's place; the old folder (if any) is removed."""
    if not os.path.lexists(out_dir):
        os.rename(staging, out_dir)
        return
    if _exchange(staging, out_dir):
        shutil.rmtree(staging, ignore_errors=True)  # now holds the old outputs
        return
    old = Path(tempfile.mkdtemp(prefix=_staging_prefix(out_dir), suffix=".tmp", dir=out_dir.parent))
    os.rename(out_dir, old / "old")
    os.rename(staging, out_dir)
    shutil.rmtree(old, ignore_errors=True)


def write_folder(
    out_dir: Path | str,
    writers: dict[str, Callable[[Path], object]],
    owned: Collection[str],
) -> list[Path]:
    """Write each `name -> writer(path)` into a fresh staging folder, then make it out_dir.

    `owned`: every name a run may leave in out_dir (checked again here, under the lock)."""
    out_dir = Path(out_dir)
    check_output_folder(out_dir, owned)
    target = out_dir.resolve()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TransitsimError(f"cannot make {out_dir.parent} ({exc.strerror})") from None
    try:
        _write_staged(out_dir, target, writers, owned)
    except OSError as exc:  # the folder (or its parent) removed meanwhile, a full disk, ...
        raise TransitsimError(_write_failure(out_dir, target, exc)) from None
    return [out_dir / name for name in writers]


def _write_failure(out_dir: Path, target: Path, exc: OSError) -> str:
    reason = exc.strerror or str(exc).split(":")[0] or type(exc).__name__
    if not target.parent.is_dir():
        return (
            f"output folder {out_dir}: its folder {target.parent} was removed while the run "
            f"wrote its outputs ({reason}); nothing was written"
        )
    return f"output folder {out_dir}: cannot write it ({reason}); the previous outputs are kept"


def _write_staged(
    out_dir: Path,
    target: Path,
    writers: dict[str, Callable[[Path], object]],
    owned: Collection[str],
) -> None:
    """write_folder's work: staged, then published under the parent's lock."""
    with signals_raise():
        with _parent_locked(target):
            remove_stale_staging(out_dir)
            staging = Path(
                tempfile.mkdtemp(prefix=_staging_prefix(target), suffix=".tmp", dir=target.parent)
            )
            fd = os.open(staging, os.O_RDONLY | os.O_DIRECTORY)
            fcntl.flock(fd, fcntl.LOCK_EX)  # before the parent's lock is let go: never "stale"
        try:
            for name, writer in writers.items():
                check_writable_file(staging / name)
                writer(staging / name)
            os.chmod(staging, 0o755)  # mkdtemp makes it private; results are shared
            with _parent_locked(target):  # one publisher at a time in this parent folder
                check_output_folder(out_dir, owned)
                _publish(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        finally:
            os.close(fd)  # also lets go of the staging lock
