"""Errors the CLI turns into exit codes."""


class UsageError(Exception):
    """Bad input (suite file, flag, option): one line, exit code 2, nothing written."""


class Unsupported(Exception):
    """Raised by an adapter when it cannot host a workload here (missing package, no GPU, ...)."""
