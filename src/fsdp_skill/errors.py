"""The exceptions the CLI turns into one line on stderr and an exit status."""


class UsageError(Exception):
    """Bad usage or unreadable input: the CLI prints ``error: <message>`` and exits 2."""


class Terminated(BaseException):
    """SIGTERM arrived while a bundle was being written: the clean-up ran (exit status 143)."""
