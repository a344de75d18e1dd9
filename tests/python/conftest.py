"""Tests run against the build tree: OVF_BUILD_DIR (default <repo>/build)."""

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("OVF_BUILD_DIR", os.path.join(REPO, "build"))
PACKAGE_PARENT = os.path.join(BUILD, "python")
if not os.path.isdir(os.path.join(PACKAGE_PARENT, "ovf")):
    raise RuntimeError(f"ovf is not built in {BUILD}: run cmake and ninja first (see README.md)")
sys.path.insert(0, PACKAGE_PARENT)
