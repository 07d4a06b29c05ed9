"""The runtime: backends, selection, launch limits, the compiler, the disk cache, the CLI, the code's layout."""
