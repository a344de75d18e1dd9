"""argparse types for the commands' arguments; errors read as one line."""

import argparse
import math


def _integer_at_least(text, minimum, what):
    try:
        value = int(text, 10)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what} (an integer >= {minimum})")
    return value


def batch_number(text):
    return _integer_at_least(text, 0, "a batch number")


def count(text):
    return _integer_at_least(text, 1, "a count")


def fraction(text):
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction (a number in (0, 1])")
    return value


def threshold(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if math.isnan(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a magnitude (a number >= 0)")
    return value


def batch_list(text):
    """"1,3,5" -> (1, 3, 5); "off" -> ()."""
    if text.strip().lower() in ("off", "none", ""):
        return ()
    batches = tuple(batch_number(part.strip()) for part in text.split(","))
    if len(batches) > 32:
        raise argparse.ArgumentTypeError("at most 32 batches (the runtime's trace list)")
    return batches


def batch_or_off(text):
    return None if text.strip().lower() in ("off", "none") else batch_number(text)
