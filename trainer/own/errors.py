"""What trainer.own raises for a value or a type it cannot use: a TransitsimError (one line at
the command line, like every input error of this project) that Python code can also catch as
the ValueError or TypeError it is."""

from transitsim.base.errors import TransitsimError


class OwnValueError(TransitsimError, ValueError):
    """A value out of its range (a negative loss, a fractional step, a model with nothing to
    train)."""


class OwnTypeError(TransitsimError, TypeError):
    """A value of a kind that cannot be one (text where a number goes, a tensor of many
    elements)."""
