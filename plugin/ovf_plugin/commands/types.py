"""argparse types for the commands' arguments; errors read as one line."""

import argparse
import math


def batch_number(text):
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a batch number (an integer >= 0)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a batch number (an integer >= 0)")
    return value


def count(text):
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count (an integer >= 1)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count (an integer >= 1)")
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
