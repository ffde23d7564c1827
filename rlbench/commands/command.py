"""What a command is: its name, help, the request its flags fill and its handler (rlbench.commands lists them)."""
from dataclasses import dataclass
from typing import Callable

from rlbench.planning.request import flag_of


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    request: type = None                       # a frozen rlbench.planning.request.Request: its fields are the flags
    handler: Callable = None                   # request -> exit code
    validate_only: bool = False                # take only the fields marked validate (validate: not a sweep's)
    verbs: tuple = ()                          # sub-commands (history add, show, check) instead of a handler

    def takes(self, f) -> bool:
        """Whether field `f` of the request is one of this command's flags."""
        meta = flag_of(f)
        return meta is not None and (meta["validate"] or not self.validate_only)
