"""Tests run against the build tree (see build_paths.py)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import build_paths  # noqa: E402,F401 - puts the built package on sys.path
from sharding import (  # noqa: E402,F401 - OVF_TEST_SHARD=K/N, OVF_TEST_QUEUE
    pytest_collection_modifyitems,
    pytest_runtestloop,
)
