"""Failure as a type: a fast path that cannot answer exactly says why, and the caller runs the DES.

Every fast path in `network/fast/` returns its timing (or its parts) where it can prove the
answer equal to the DES's, else `NotExact(reason)`; the reason is the text the exchange reports
when it falls back to the DES (or refuses a size the DES cannot take).
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class NotExact:
    """The fast path would not be exact here; `reason` says why (shown to the user as is)."""

    reason: str
