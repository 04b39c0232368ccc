"""``python -m zeroforge``: the ``zeroforge`` command."""

from zeroforge.deploy.cli import main

raise SystemExit(main())
