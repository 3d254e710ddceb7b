"""Checkpoints: everything a run needs to continue bit for bit, written atomically.

A checkpoint is one torch.save file beside the trace. It is written to a temporary file in the
same folder and renamed into place, so a kill at any moment leaves the previous checkpoint or the
new one, never half of one.
"""

import zipfile
from pathlib import Path
from typing import Any

import torch

from transitsim.base.atomic import atomic_path
from transitsim.base.errors import TransitsimError

CHECKPOINT_FORMAT = 1


def checkpoint_path(out_dir: Path, run_name: str) -> Path:
    return Path(out_dir) / f"{run_name}.ckpt"


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write `state` (tensors, state dicts, plain Python values) atomically."""
    with atomic_path(path, shared=False) as tmp:
        torch.save({"format": CHECKPOINT_FORMAT, **state}, tmp)


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Read a checkpoint this trainer wrote; anything else is a one-line TransitsimError.

    Never runs code from the file: a file that is not torch.save's zip archive is refused
    unread, and the archive is unpickled with weights_only=True, which builds only tensors and
    plain containers, numbers and text (what `state()` holds) and refuses any other object.
    A pickle dropped into the output folder as <run>.ckpt would otherwise run when train resumes.
    """
    if not zipfile.is_zipfile(path):
        raise TransitsimError(
            f"{path}: unreadable checkpoint (not a torch archive, refused unread); delete it to "
            "start afresh"
        )
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - a corrupt file can fail in many ways
        raise TransitsimError(
            f"{path}: unreadable checkpoint ({type(exc).__name__}); delete it to start afresh"
        ) from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise TransitsimError(
            f"{path}: not a checkpoint of this trainer; delete it to start afresh"
        )
    return state
