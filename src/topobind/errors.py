"""The one exception type the CLI turns into a one-line error and exit status 2."""


class TopobindError(Exception):
    """A user-facing error: bad input, an impossible request, a missing tool.

    The message is one line that says what is wrong and what to change.
    """


class TopologyError(TopobindError):
    """The topology source is missing, malformed or unusable."""


class PlanError(TopobindError):
    """The requested layout cannot be planned on this topology."""
