"""ovf_plugin's Target over LLDB's SB API."""

import contextlib
import os
import re
import struct

import lldb

from ovf_plugin.errors import OvfError
from ovf_plugin.proc_target import writable_regions
from ovf_plugin.target import Target, TargetMemoryError
from ovf_plugin.unopened_core import named_core

CALLBACK = "ovf_lldb.stop_callback"  # resolved by LLDB in the module `command script import` loaded
_CORE_PLUGINS = ("elf-core", "minidump", "mach-o-core")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FILE_LIST_ITEM = re.compile(r"\[\d+\]: (.*?)(?=  \[\d+\]: |\n|$)")
MAX_LIBRARIES = 4096  # cap on the dynamic loader's list read from a core (untrusted memory)


class LldbTarget(Target):
    """One LLDB debugger's selected target; a command or a breakpoint callback
    pins the SBTarget it runs for with `pinned` (state comes from exe_ctx)."""

    def __init__(self, debugger):
        self.debugger = debugger
        self._pinned = None
        self._breakpoint = None  # (SBTarget, breakpoint id)

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

    def kind(self):
        process = self._process()
        if process is None:
            return "none"
        # An SBProcess says which plugin it comes from: a core file's is a core plugin.
        return "core" if process.GetPluginName() in _CORE_PLUGINS else "live"

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
        process = target.GetProcess()
        libraries = []
        try:
            entry = struct.unpack("<Q", self.read_memory(r_debug + 8, 8))[0]  # r_debug.r_map
            seen = set()
            while entry and entry not in seen and len(libraries) < MAX_LIBRARIES:
                seen.add(entry)
                # struct link_map { l_addr; l_name; l_ld; l_next; l_prev; }
                l_addr, l_name, _, l_next = struct.unpack("<4Q", self.read_memory(entry, 32))
                error = lldb.SBError()
                path = process.ReadCStringFromMemory(l_name, 4096, error) if l_name else ""
                if error.Success() and path:
                    libraries.append((l_addr, path))
                entry = l_next
        except TargetMemoryError:
            pass  # a cut core: what was read so far
        return libraries

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

    def library_hint(self):
        return "point lldb at it with: settings append target.exec-search-paths DIR"

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

    # ------------------------------------------------------------ breakpoint

    def set_stop_breakpoint(self, function, callback):
        target = self.sbtarget()
        if not target.IsValid():
            raise OvfError(
                "ovf: no program: start lldb with one (lldb -- python3 train.py) "
                "or `target create` it first"
            )
        bp = None
        if self._breakpoint is not None and self._breakpoint[0] == target:
            bp = target.FindBreakpointByID(self._breakpoint[1])
        if bp is None or not bp.IsValid():
            # Made before `run` it is pending and resolves when the runtime library loads.
            bp = target.BreakpointCreateByName(function)
            self._breakpoint = (target, bp.GetID())
        error = bp.SetScriptCallbackFunction(CALLBACK)  # None in the one-argument form
        if error is not None and error.Fail():
            raise OvfError(f"ovf: cannot set the breakpoint's callback: {error.GetCString()}")
        self.callback = callback
        return bp

    def is_stop_breakpoint(self, target, breakpoint_id):
        return (
            self._breakpoint is not None
            and self._breakpoint[0] == target
            and self._breakpoint[1] == breakpoint_id
        )

    # ------------------------------------------------------------ environment

    def get_environment(self, name):
        target = self.sbtarget()
        if not target.IsValid():
            return None
        return target.GetEnvironment().Get(name)

    def set_environment(self, name, value):
        target = self.sbtarget()
        if not target.IsValid():
            raise OvfError(
                "ovf: no program: start lldb with one (lldb -- python3 train.py) "
                "or `target create` it first"
            )
        # target.env-vars holds what the user set; the inferior gets LLDB's own
        # environment (target.inherit-env) less target.unset-env-vars plus
        # target.env-vars. Values go through the SB API: `settings set` would
        # evaluate backticks in them.
        explicit = _settings_dictionary(self.debugger, "target.env-vars")
        if value is None:
            explicit.pop(name, None)
        else:
            explicit[name] = value
        environment = lldb.SBEnvironment()
        for key, text in explicit.items():
            environment.Set(key, text, True)
        info = target.GetLaunchInfo()
        info.SetEnvironment(environment, False)
        target.SetLaunchInfo(info)
        if value is None and target.GetEnvironment().Get(name) is not None and _NAME.match(name):
            self._command(f"settings append target.unset-env-vars {name}")

    def _command(self, line):
        result = lldb.SBCommandReturnObject()
        self.debugger.GetCommandInterpreter().HandleCommand(line, result)
        if not result.Succeeded():
            raise OvfError(f"ovf: {line}: {(result.GetError() or '').strip()}")


def _search_paths(debugger):
    """target.exec-search-paths: SBDebugger.GetSetting has no value for a file
    list, so the `settings show` line is parsed ("...(file-list) =\n  [0]: /a  [1]: /b")."""
    result = lldb.SBCommandReturnObject()
    debugger.GetCommandInterpreter().HandleCommand("settings show target.exec-search-paths", result)
    text = (result.GetOutput() or "").split("=", 1)[-1].strip("\n")
    return [path for path in _FILE_LIST_ITEM.findall(text) if path]


def _settings_dictionary(debugger, name):
    data = debugger.GetSetting(name)
    keys = lldb.SBStringList()
    if not data.IsValid() or not data.GetKeys(keys):
        return {}
    out = {}
    for i in range(keys.GetSize()):
        key = keys.GetStringAtIndex(i)
        out[key] = data.GetValueForKey(key).GetStringValue(1 << 20) or ""
    return out
