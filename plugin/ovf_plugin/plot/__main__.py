"""python3 -m ovf_plugin.plot PICTURE.json FILE: renders a collected Picture
(DebugUnderflowOverflow.plot's child process); prints the drawn matrix as JSON."""

import json
import sys

from ovf_ring.errors import OvfError
from ovf_ring.picture import Picture

from . import render, summary


def main(argv=None):
    """python3 -m ovf_plugin.plot PICTURE.json FILE: renders a collected
    Picture (DebugUnderflowOverflow.plot's child process); prints the drawn
    matrix as JSON on stdout."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python3 -m ovf_plugin.plot PICTURE.json FILE", file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        picture = Picture.from_json(f.read())
    try:
        drawn = render(picture, argv[1])
    except OvfError as e:
        print(e, file=sys.stderr)
        return 1
    print(json.dumps({"drawn": drawn, "summary": summary(picture, drawn, argv[1])}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
