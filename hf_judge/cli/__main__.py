"""``python -m hf_judge.cli``: the ``hf-judge`` command."""

import sys

from .entry import main

sys.exit(main())
