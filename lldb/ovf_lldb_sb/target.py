"""ovf_ring's Target (the program's memory) over LLDB's SB API."""

import contextlib
import os
import re

from ovf_ring.loader import loaded_libraries
from ovf_ring.proc_target import writable_regions
from ovf_ring.target import Target, TargetMemoryError
from ovf_ring.unopened_core import named_core

import lldb

_CORE_PLUGINS = ("elf-core", "minidump", "mach-o-core")
_FILE_LIST_ITEM = re.compile(r"\[\d+\]: (.*?)(?=  \[\d+\]: |\n|$)")


class LldbTarget(Target):
    """One LLDB debugger's selected target; a command or a breakpoint callback
    pins the SBTarget it runs for with `pinned` (state comes from exe_ctx)."""

    def __init__(self, debugger):
        self.debugger = debugger
        self._pinned = None

    @contextlib.contextmanager
    def pinned(self, target):
        previous, self._pinned = (
            self._pinned,
            target if target is not None and target.IsValid() else None,
        )
        try:
            yield self
        finally:
            self._pinned = previous

    def sbtarget(self):
        return self._pinned if self._pinned is not None else self.debugger.GetSelectedTarget()

    def _process(self):
        target = self.sbtarget()
        if not target.IsValid():
            return None
        process = target.GetProcess()
        if not process.IsValid() or process.GetState() in (
            lldb.eStateInvalid,
            lldb.eStateUnloaded,
            lldb.eStateExited,
            lldb.eStateDetached,
            lldb.eStateConnected,
        ):
            return None
        return process

    # ------------------------------------------------------------ memory

    def unopened_core_path(self):
        """`lldb -c CORE` / `--core CORE`: the core LLDB was given."""
        return named_core(("-c", "--core"), positional_core=False)

    def core_file(self):
        process = self._process()
        get = getattr(process, "GetCoreFile", None)  # LLDB 16 and later
        if process is None or get is None:
            return self.unopened_core_path()  # the core named on LLDB's command line
        spec = get()
        return spec.fullpath if spec.IsValid() and spec.fullpath else None

    def kind(self):
        process = self._process()
        if process is None:
            return "none"
        # An SBProcess says which plugin it comes from: a core file's is a core plugin.
        return "core" if process.GetPluginName() in _CORE_PLUGINS else "live"

    def pid(self):
        # A pid of this host only: a remote platform's process is another host's.
        process = self._process()
        if process is None or self.sbtarget().GetPlatform().GetName() != "host":
            return None
        return process.GetProcessID()

    def read_memory(self, address, size):
        process = self._process()
        if process is None:
            raise TargetMemoryError("no process")
        if size == 0:
            return b""
        error = lldb.SBError()
        try:
            data = process.ReadMemory(address, size, error)
        except (OverflowError, TypeError, ValueError) as e:  # an address out of range for SWIG
            raise TargetMemoryError(str(e)) from None
        if error.Fail() or data is None or len(data) != size:
            why = error.GetCString() if error.Fail() else "short read"
            raise TargetMemoryError(f"cannot read {size} bytes at 0x{address:x}: {why}")
        return data

    def write_memory(self, address, data):
        process = self._process()
        if process is None:
            raise TargetMemoryError("no process")
        error = lldb.SBError()
        try:
            written = process.WriteMemory(address, bytes(data), error)
        except (OverflowError, TypeError, ValueError) as e:
            raise TargetMemoryError(str(e)) from None
        if error.Fail() or written != len(data):
            raise TargetMemoryError(
                f"cannot write at 0x{address:x}: {error.GetCString() or 'short write'}"
            )

    # ------------------------------------------------------------ symbols

    def find_data_symbol(self, name):
        target = self.sbtarget()
        if not target.IsValid():
            return None
        # The dynamic symbol of a stripped library is enough: no debug info needed.
        for context in target.FindSymbols(name, lldb.eSymbolTypeData):
            address = context.GetSymbol().GetStartAddress().GetLoadAddress(target)
            if address != lldb.LLDB_INVALID_ADDRESS:
                return address
        if self.kind() == "core":
            return self._symbol_in_searched_library(name)
        return None

    def _libraries(self):
        """[(load bias, path)] from the dynamic loader's list (_r_debug.r_map) in
        the process's memory: what the process had loaded, found or not by LLDB."""
        target = self.sbtarget()
        r_debug = None
        for context in target.FindSymbols("_r_debug", lldb.eSymbolTypeData):
            address = context.GetSymbol().GetStartAddress().GetLoadAddress(target)
            if address != lldb.LLDB_INVALID_ADDRESS:
                r_debug = address
                break
        if r_debug is None:
            return []
        return loaded_libraries(self, r_debug)

    def _module_paths(self):
        target = self.sbtarget()
        paths = set()
        for i in range(target.GetNumModules()):
            module = target.GetModuleAtIndex(i)
            for spec in (module.GetFileSpec(), module.GetPlatformFileSpec()):
                if spec.IsValid() and spec.fullpath:
                    paths.add(spec.fullpath)
        return paths

    def missing_library(self, name_part):
        if self.kind() != "core":
            return None  # a live process has every library it loaded
        known = self._module_paths()
        for _, path in self._libraries():
            if name_part in os.path.basename(path) and path not in known:
                return path
        return None

    def _symbol_in_searched_library(self, name):
        """A core whose runtime library moved: LLDB looks in target.exec-search-paths
        only while it loads the core, so a directory added later is searched here,
        and the library loaded at the address the core's loader list gives.
        (`target modules search-paths add`, SBTarget.AppendImageSearchPath, is no
        way out: on a loaded core LLDB 19 then drops every library's load address.)"""
        target = self.sbtarget()
        known = self._module_paths()
        directories = _search_paths(self.debugger)
        for bias, path in self._libraries():
            base = os.path.basename(path)
            if "libovf_runtime" not in base or path in known:
                continue
            for directory in directories:
                candidate = os.path.join(directory, base)
                if not os.path.isfile(candidate):
                    continue
                module = target.AddModule(candidate, None, None)
                if not module.IsValid() or target.SetModuleLoadAddress(module, bias).Fail():
                    continue
                for context in module.FindSymbols(name, lldb.eSymbolTypeData):
                    address = context.GetSymbol().GetStartAddress().GetLoadAddress(target)
                    if address != lldb.LLDB_INVALID_ADDRESS:
                        return address
        return None

    def memory_regions(self):
        process = self._process()
        if process is None:
            return []
        if self.kind() == "live":
            return writable_regions(process.GetProcessID())
        # A core's regions carry no file names in LLDB: name each by the library
        # loaded at or before it (a library's .bss follows its file mappings).
        libraries = sorted(self._libraries())
        regions = []
        infos = process.GetMemoryRegions()
        info = lldb.SBMemoryRegionInfo()
        for i in range(infos.GetSize()):
            if not infos.GetMemoryRegionAtIndex(i, info) or not info.IsWritable():
                continue
            start, end = info.GetRegionBase(), info.GetRegionEnd()
            path = next((p for bias, p in reversed(libraries) if bias and bias <= start), "")
            regions.append((start, end, path))
        return regions


def _search_paths(debugger):
    """target.exec-search-paths: SBDebugger.GetSetting has no value for a file
    list, so the `settings show` line is parsed ("...(file-list) =\n  [0]: /a  [1]: /b")."""
    result = lldb.SBCommandReturnObject()
    debugger.GetCommandInterpreter().HandleCommand("settings show target.exec-search-paths", result)
    text = (result.GetOutput() or "").split("=", 1)[-1].strip("\n")
    return [path for path in _FILE_LIST_ITEM.findall(text) if path]
