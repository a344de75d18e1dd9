"""ovf's bootstrap: turns ovf on in an unmodified script when it imports torch.

A debugger's ``ovf`` commands (or anything else) put this directory first on
the inferior's PYTHONPATH with OVF_ENABLE=1 and OVF_* options. This file then
makes the ``ovf`` package importable, arms a one-shot import hook for torch,
and hands over to the next ``sitecustomize`` on the path, as coverage and
tracing agents do. It imports nothing heavy itself.
"""

import os
import sys


def _ovf_bootstrap():
    here = os.path.dirname(os.path.abspath(__file__))
    package_parent = os.path.dirname(os.path.dirname(here))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    if os.environ.get("OVF_ENABLE") == "1":
        if package_parent not in sys.path:
            sys.path.append(package_parent)
        sys.meta_path.insert(0, _TorchImportHook())
    _chain_to_next_sitecustomize()


class _TorchImportHook:
    """Meta path finder that lets torch import normally, then enables ovf."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)  # one shot, and lets find_spec below find the real torch
        import importlib.util

        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        real_exec = spec.loader.exec_module

        def exec_module(module):
            real_exec(module)
            if _running_ovf_main():
                return  # python -m ovf imports torch first, then enables ovf with these options
            try:
                import ovf._auto

                ovf._auto.enable_from_environment()
            except Exception as e:  # noqa: BLE001 - never break the user's import of torch
                print(f"ovf: not enabled: {e}", file=sys.stderr)

        spec.loader.exec_module = exec_module
        return spec


def _running_ovf_main():
    """Whether the program is ``python -m ovf``: it imports torch before its own
    modules are whole (enabling here would import them half made), and enables
    ovf itself, the session's OVF_* options beside the ones it was given."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec is not None and spec.name == "ovf.__main__"


def _chain_to_next_sitecustomize():
    mine = sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401 - the next one on sys.path, if any
    except ModuleNotFoundError as e:
        if e.name != "sitecustomize":
            raise
        if mine is not None:
            sys.modules["sitecustomize"] = mine


_ovf_bootstrap()
