"""Errors the CLI turns into exit codes."""


class UsageError(Exception):
    """Bad input (suite file, flag, option): one line, exit code 2, nothing written."""


class Unsupported(Exception):
    """Raised by an adapter when it cannot host a workload here (missing package, no GPU, ...)."""


def install_hint(exc: BaseException) -> str:
    """For a user's module that is not installed: how to install it into the environment rlbench runs in
    ("" for any other failure to import)."""
    import sys
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return ""
    return (f" (not installed here: {sys.executable} -m pip install <the package that provides "
            f"{exc.name.split('.')[0]}>, or put its folder on PYTHONPATH)")
