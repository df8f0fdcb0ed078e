"""``python -m polytok``: the command line."""

from polytok.cli import main

main()
