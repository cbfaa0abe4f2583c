"""``python -m dask_gpu_parity.cli``: the same as the ``dask-gpu-parity`` command."""

import sys

from . import main

sys.exit(main())
