"""``python -m kelpie_dst`` is the ``kelpie-dst`` command (and where the launcher re-executes to)."""

from ._cli import main

main()
