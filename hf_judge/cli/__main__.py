"""``python -m hf_judge.cli``: the ``hf-judge`` command."""

import sys

from .commands import main

sys.exit(main())
