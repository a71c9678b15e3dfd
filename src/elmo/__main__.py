"""``python -m elmo`` (also what ``torchrun -m elmo`` runs)."""

import sys

from elmo.cli import main

sys.exit(main())
