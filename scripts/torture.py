#!/usr/bin/env python3
"""make torture: the fault suite's entry point, with the command line it always had.

The suite itself is the package beside this file, scripts/torture/ (its docstring says what it
does, how it is laid out and why it is a Python package); `cd scripts && python3 -m torture` runs
the same.

    python3 scripts/torture.py --seed 7 --ops 300        (or: make torture SEED=7 OPS=300)
    python3 scripts/torture.py --engine postgres         (or: make torture ENGINE=postgres)
"""
import sys
from pathlib import Path

# The package, not this file, is `torture`: put scripts/ first on the path (it is already when this
# file runs as a script; not when it is imported from elsewhere).
sys.path.insert(0, str(Path(__file__).resolve().parent))

from torture.main import main  # noqa: E402

if __name__ == "__main__":
    main()
