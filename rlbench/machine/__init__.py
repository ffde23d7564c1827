"""The machine: its fingerprint, its measured limits (memory copy, disk) and page-cache state."""
