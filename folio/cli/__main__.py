"""``python -m folio.cli``."""

from folio.cli import main

raise SystemExit(main())
