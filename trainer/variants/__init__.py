"""The variants' algorithms behind one interface (gradient_exchange.GradientExchange): dense
AdamW (A, dense.py), DeMo top-k (B), fixed bands (C, D, F, G), the optical band (E, E') in
demo.py, local SGD (H, H-s, L) in local_sgd.py, picked once by build.py; and their wire."""
