"""``python -m kelpie_dst`` is the ``kelpie-dst`` command."""

from ._cli import main

main()
