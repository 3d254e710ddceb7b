"""Atomic writes: a temp file beside the target, renamed into place, so a crash or a kill at any
moment leaves the old file or the new one, never half of one. Every result file goes through here.
"""

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: Path | str, *, shared: bool = True) -> Iterator[Path]:
    """A temp path beside `path` (".<name>.<random>.tmp") that replaces it when the block ends
    without error; on error it is removed and `path` is left as it was. `shared` makes the file
    world-readable (mkstemp makes it private): results are meant to be shared, checkpoints not."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        if shared:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path | str, text: str) -> Path:
    """Write text atomically (UTF-8); returns the path."""
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path
