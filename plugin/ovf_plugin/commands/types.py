"""argparse types for the commands' arguments; errors read as one line."""

import argparse
import decimal
import math
import sys

# What the runtime's fields hold (ring.h): batch numbers are int64, counts
# (frames to list) are bounded by what a ring can hold.
MAX_BATCH = 2**63 - 1
MAX_COUNT = 2**30
GLOB_BYTES = 255


def _integer_in(text, minimum, maximum, what):
    try:
        value = int(text, 10)
    except ValueError:
        value = None
    if value is None or not minimum <= value <= maximum:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not {what} (an integer from {minimum} to {maximum})"
        )
    return value


def batch_number(text):
    return _integer_in(text, 0, MAX_BATCH, "a batch number")


def count(text):
    return _integer_in(text, 1, MAX_COUNT, "a count")


def skips(text):
    return _integer_in(text, 0, 2**32 - 1, "a number of skipped steps")


def batches_ahead(text):
    return _integer_in(text, 1, 2**32 - 1, "a number of batches")


def module_glob(text):
    """An fnmatch pattern that fits the control block (255 bytes of UTF-8)."""
    size = len(text.encode("utf-8", "surrogateescape"))
    if size > GLOB_BYTES:
        raise argparse.ArgumentTypeError(
            f"a module glob holds at most {GLOB_BYTES} bytes; this one has {size}"
        )
    return text


def fraction(text):
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction (a number in (0, 1])")
    return value


def share(text):
    """A share of a tensor's values, 0 to 1 (0: the first one)."""
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share (a number from 0 to 1)")
    return value


def threshold(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if math.isnan(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a magnitude (a number >= 0)")
    # A double cannot hold it: 1e400 arms `> inf`, which never fires, and 1e-400
    # arms `< 0` in its place, both without a word.
    if math.isinf(value) or (value == 0 and _nonzero(text)):
        raise argparse.ArgumentTypeError(
            f"{text!r} reads as {value!r} in a double: give 0 or a magnitude from "
            f"{5e-324!r} to {sys.float_info.max:.1e}"
        )
    return value


def _nonzero(text):
    try:
        return decimal.Decimal(text.strip()) != 0
    except decimal.InvalidOperation:  # a form float() reads and Decimal does not
        return False


def batch_list(text):
    """ "1,3,5" -> (1, 3, 5); "off" -> ()."""
    if text.strip().lower() in ("off", "none", ""):
        return ()
    if any(not part.strip() for part in text.split(",")):
        raise argparse.ArgumentTypeError(
            f"{text!r} has an empty batch number: give batch numbers separated by single "
            "commas, e.g. 1,3"
        )
    batches = tuple(batch_number(part.strip()) for part in text.split(","))
    if len(batches) > 32:
        raise argparse.ArgumentTypeError("at most 32 batches (the runtime's trace list)")
    return batches


def batch_or_off(text):
    return None if text.strip().lower() in ("off", "none") else batch_number(text)
