"""One error type for everything a user can get wrong, so the CLI can print one line and exit 2."""

import re

# what str.splitlines() splits on, and the other control characters a terminal acts on
_BREAKS = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")


def escaped_line(text: object) -> str:
    """A message as one printable line: a file's own text (a key holding a newline) is shown
    escaped, as repr would, never as a line break or a terminal control."""
    return _BREAKS.sub(lambda m: repr(m.group())[1:-1], str(text))


class TransitsimError(Exception):
    """A problem with the user's input (file, option, value): printed as one line, exit code 2."""


class TraceError(TransitsimError):
    """A file that is not a valid trace of a known format version."""


def error_line(exc: BaseException) -> str:
    """An exception as one line: our own errors as they are, anything else with its type (a
    failed job's reason, beside the jobs that ran)."""
    text = " ".join(str(exc).split()) if str(exc).strip() else ""
    if isinstance(exc, TransitsimError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
