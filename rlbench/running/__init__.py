"""Running: the sweep, a fresh child process per (cell, repeat) and its timing, the process tree and what
it leaves behind, progress, adapters' own environments and the run folder."""
