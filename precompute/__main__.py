"""``python -m precompute``: see :mod:`precompute.cli` for commands and exit codes."""

from precompute.cli import main

raise SystemExit(main())
