"""``python -m webhook`` does what the ``stszone`` console script does."""

import sys

from webhook.cli import main

sys.exit(main())
