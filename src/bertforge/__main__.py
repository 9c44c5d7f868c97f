"""`python -m bertforge <verb>` (and so `torchrun -m bertforge <verb>`)."""
import sys

from bertforge.cli import main

sys.exit(main())
