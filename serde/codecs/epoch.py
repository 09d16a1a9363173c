"""Epoch arithmetic shared by the date and timestamp codecs.

Decoded dates and timestamps must be representable as Python ``date`` /
``datetime`` (years 1..9999) so that the row-wise and batch paths agree; the
batch kernels check these bounds and leave anything outside to the scalar
decoder, which rejects it.
"""

from __future__ import annotations

import datetime as _dt

__all__ = [
    "EPOCH",
    "EPOCH_DATE",
    "MIN_DAYS",
    "MAX_DAYS",
    "MIN_US",
    "MAX_US",
    "MS_PER_DAY",
    "US",
    "MS",
    "datetime_to_us",
    "date_to_days",
]

EPOCH = _dt.datetime(1970, 1, 1)
EPOCH_DATE = _dt.date(1970, 1, 1)
MIN_DAYS = (_dt.date.min - EPOCH_DATE).days
MAX_DAYS = (_dt.date.max - EPOCH_DATE).days
US = _dt.timedelta(microseconds=1)
MS = _dt.timedelta(milliseconds=1)
MIN_US = (_dt.datetime.min - EPOCH) // US
MAX_US = (_dt.datetime.max - EPOCH) // US
MS_PER_DAY = 86_400_000


def datetime_to_us(value: _dt.datetime) -> int:
    """Microseconds since the epoch of a naive (UTC) or aware datetime."""
    if value.tzinfo is not None:
        value = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    return (value - EPOCH) // US


def date_to_days(value: _dt.date) -> int:
    """Days since the epoch; a datetime counts as its date."""
    if isinstance(value, _dt.datetime):
        value = value.date()
    return (value - EPOCH_DATE).days
