"""The one exception the plugin raises for the user to read."""


class OvfError(Exception):
    """A failure the user can act on; its text is one line (or a usage block)
    that a front end prints as is, never with a traceback."""
