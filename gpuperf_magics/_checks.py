"""Small checks of single values that every layer makes: a positive number, a missing cell, a
numpy scalar as a plain Python value.

The bottom layer: the standard library only (numpy and pandas values are recognised by their
type's module, so checking a value never imports them).
"""

from __future__ import annotations

import math
import numbers
from typing import Any


def positive_number(value: Any, name: str, *, whole: bool = False,
                    error: type[Exception] = ValueError) -> Any:
    """``value`` as a finite number > 0: an ``int`` when ``whole``, else a ``float``.

    Parameters
    ----------
    value : number, str or None
        A Python or numpy number, or its text (``"32"``, ``" 2.5 "``: what an option, a
        price file or a spec sheet holds). None means not given and is returned as None.
    name : str
        What the value is, for the message (``"batch_size"``, ``"--epochs"``).
    whole : bool, default False
        The value must be a whole number (``32.0`` is one, ``32.5`` is not).
    error : exception class, default ValueError
        What to raise (``PredictionError``, ``PriceError``, ``argparse.ArgumentTypeError``):
        each interface keeps its own kind of error.

    Raises
    ------
    error
        A boolean, text that is no number (``"1_000"``, whose digits Python would join, is
        none), NaN, infinity, zero or less, or a fraction where ``whole`` is asked.
    """
    if value is None:
        return None
    wanted = "a whole number" if whole else "a number"
    if isinstance(value, str) and "_" not in value:
        try:
            number = float(value)
        except ValueError:
            raise error(f"{name} must be {wanted}, got {value!r}") from None
    elif isinstance(value, numbers.Number) and not _is_bool(value):
        try:
            number = float(value)  # type: ignore[arg-type]
        except OverflowError:  # an int beyond any float is not finite either
            number = math.inf
        except TypeError:  # a complex number
            raise error(f"{name} must be {wanted}, got {value!r}") from None
    else:
        raise error(f"{name} must be {wanted}, got {value!r}")
    if not (math.isfinite(number) and number > 0):
        raise error(f"{name} must be a finite number > 0, got {value!r}")
    if whole:
        if not number.is_integer():
            raise error(f"{name} must be a whole number, got {value!r}")
        return int(value) if isinstance(value, numbers.Integral) else int(number)
    return number


def _is_bool(value: Any) -> bool:
    """Python's and numpy's booleans (``numpy.bool_`` is no ``bool`` subclass)."""
    return isinstance(value, bool) or (type(value).__module__ == "numpy"
                                       and type(value).__name__ in ("bool", "bool_"))


#: pandas' missing-value singletons, by type name (so pandas need not be imported).
_PANDAS_MISSING = ("NAType", "NaTType")


def is_missing(value: Any, *, blank_text: bool = True) -> bool:
    """Whether a cell holds no value: None, NaN (Python, numpy or ``Decimal``), ``pandas.NA``,
    ``NaT``, and with ``blank_text`` empty or all-blank text.

    Any other value, containers included, is a value (``[]`` and ``{}`` are empty values, not
    missing ones). ``blank_text=False`` keeps ``""`` as text, as an import of a text column
    that distinguishes an empty note from a missing one does.
    """
    if value is None:
        return True
    if isinstance(value, str):
        return blank_text and not value.strip()
    kind = type(value)
    if kind.__module__.startswith("pandas") and kind.__name__ in _PANDAS_MISSING:
        return True
    try:
        unequal = value != value  # NaN and NaT are the values unequal to themselves
    except ArithmeticError:  # a signalling Decimal NaN refuses even to be compared
        return True
    except (TypeError, ValueError):
        return False
    # An array compares element-wise: it is a value, however many NaN it holds.
    return unequal is True or (getattr(unequal, "ndim", None) == 0 and bool(unequal))


def plain(value: Any) -> Any:
    """A numpy scalar as the Python value it holds (``numpy.int64(3)`` → ``3``); anything
    else unchanged. Missing values stay as they are (NaN stays NaN)."""
    # By the type's module, so that numpy is not imported for a plain value.
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        return value.item()
    return value
