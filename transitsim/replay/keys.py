"""Rows grouped by equal values, numbered in order of first appearance (hash-based, O(n)).

Replay times each distinct exchange, and each distinct (exchange, compute, compression, update),
once; a dictionary keyed by per-row tuples costs ~1 us a row in Python, pandas' MultiIndex more.
"""

from collections.abc import Sequence

import numpy as np
import pandas as pd


def first_appearance_codes(columns: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """(code of each row, the first row of each code): rows equal in every column share a code,
    and codes count up in the order their first row appears."""
    rows = len(columns[0])
    key = np.zeros(rows, dtype=np.int64)
    for column in columns:
        codes, uniques = pd.factorize(np.asarray(column), use_na_sentinel=False)
        key = pd.factorize(key * len(uniques) + codes)[0]
    firsts = np.unique(key, return_index=True)[1]
    return key.astype(np.int64, copy=False), firsts
