"""`python -m hf_longdoc ...` is `hf-longdoc ...`: what `torchrun -m hf_longdoc train ...` runs on every process."""

import sys

from .cli import main

sys.exit(main())
