"""The one exception type that turns into a one-line message and exit status 2."""


class UsageError(Exception):
    """Bad usage or unreadable input: the CLI prints ``error: <message>`` and exits 2."""
