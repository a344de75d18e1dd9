"""Where the build under test is: OVF_BUILD_DIR (default <repo>/build). A module
of its own so test files can import it whatever other conftest.py is loaded."""

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("OVF_BUILD_DIR", os.path.join(REPO, "build"))
PACKAGE_PARENT = os.path.join(BUILD, "python")
if not os.path.isdir(os.path.join(PACKAGE_PARENT, "ovf")):
    raise RuntimeError(f"ovf is not built in {BUILD}: run cmake and ninja first (see README.md)")
if PACKAGE_PARENT not in sys.path:
    sys.path.insert(0, PACKAGE_PARENT)
