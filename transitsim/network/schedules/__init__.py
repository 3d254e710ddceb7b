"""Collectives as schedules: which message goes where, after what."""
