"""``python -m kelpie_dst`` is the ``kelpie-dst`` command; the launcher re-executes into it."""

from ._cli import main

main()
