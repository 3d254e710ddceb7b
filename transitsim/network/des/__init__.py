"""The discrete-event model: SimPy processes over links shared max-min.

The reference every fast path in `network/fast/` is checked against.
"""
