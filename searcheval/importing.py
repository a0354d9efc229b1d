"""One lock for the imports that must not run in two threads at once.

A cold run loads the embedding model (torch, through sentence-transformers) in one thread while
validation imports Great Expectations (scipy) in another. scipy's array-API helpers look torch up
in `sys.modules` and read `torch.Tensor`: half-imported by the other thread, that raised
"partially initialized module 'torch' has no attribute 'Tensor'" and failed the run. The two
imports hold this lock; the model's loading and the validation itself still overlap.
"""

from __future__ import annotations

import threading

HEAVY_IMPORTS = threading.RLock()
