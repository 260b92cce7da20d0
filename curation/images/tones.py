"""The monotone tone curve both the verification (`verify.tone`) and the keep rule's marks of processing
(`survivor.prediction_error`) fit: grey levels in TONE_BINS bins, made non-decreasing by `isotonic`."""

from __future__ import annotations

import numpy as np

TONE_BINS = 64  # grey-level bins of the tone curve


def isotonic(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The non-decreasing sequence closest to `values` in weighted least squares (pool adjacent violators)."""
    if np.all(values[1:] >= values[:-1]):
        return values
    means, totals, counts = [], [], []
    for value, weight in zip(values.tolist(), weights.tolist()):
        means.append(value)
        totals.append(weight)
        counts.append(1)
        while len(means) > 1 and means[-2] > means[-1]:
            weight = totals[-2] + totals[-1]
            means[-2] = (means[-2] * totals[-2] + means[-1] * totals[-1]) / weight
            totals[-2], counts[-2] = weight, counts[-2] + counts[-1]
            del means[-1], totals[-1], counts[-1]
    return np.repeat(means, counts)
