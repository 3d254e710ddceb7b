"""What the collectives' fast paths share: NotExact, fault delays, in-step shares, Linear, heap."""
