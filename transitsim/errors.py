"""One error type for everything a user can get wrong, so the CLI can print one line and exit 2."""


class TransitsimError(Exception):
    """A problem with the user's input (file, option, value): printed as one line, exit code 2."""


class TraceError(TransitsimError):
    """A file that is not a valid trace of a known format version."""
