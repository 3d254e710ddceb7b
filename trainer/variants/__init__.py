"""The variants' algorithms: DeMo top-k (B), fixed bands (C, D, F, G), the optical band (E,
E'), and their wire."""
