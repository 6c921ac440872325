"""``python -m mage_core`` is the same command line as ``mage``."""

from mage_core.cli import main

raise SystemExit(main())
