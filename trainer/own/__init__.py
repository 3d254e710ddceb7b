"""Bring your own training loop (issue 23, item 4): record it as a transitsim trace, and train
it under this project's exchanges.

- `TraceRecorder` writes the trace format from any loop: per step the loss, the payload bytes
  one worker sent, the measured compute and exchange seconds (recorder.py);
- `ExchangeOptimizer` is DeMo top-k (B), a fixed DCT band (C) or E's band (the emulated
  optical transform) as the optimiser of any `nn.Module`, on one process or under
  torch.distributed, with trainer/variants' own algorithms (hooks.py).
"""

from trainer.own.errors import OwnTypeError, OwnValueError
from trainer.own.hooks import EXCHANGE_VARIANTS, ExchangeOptimizer
from trainer.own.recorder import TraceRecorder

__all__ = [
    "EXCHANGE_VARIANTS",
    "ExchangeOptimizer",
    "OwnTypeError",
    "OwnValueError",
    "TraceRecorder",
]
