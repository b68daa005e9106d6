"""The one exception type for mistakes a user can fix; the CLI prints it as one line, exit 2."""


class UserError(Exception):
    """Bad input: a wrong option, a missing or unreadable file, an incompatible checkpoint."""
