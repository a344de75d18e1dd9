"""Where the bootstrap directory is, for debuggers and launchers."""

import os

BOOTSTRAP_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bootstrap")
