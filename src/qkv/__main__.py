"""``python -m qkv`` runs the command-line interface (also what torchrun launches)."""

from qkv.cli.main import main

raise SystemExit(main())
