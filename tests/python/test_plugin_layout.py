"""The decoder's field tables against the compiled ring.h, field by field."""

import json
import os
import re
import shutil
import struct
import subprocess
import sys

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "plugin"))

from ovf_ring import layout, samples, snapshot  # noqa: E402

PROGRAM = r"""
#include <cstdio>
#include "ovf/ring.h"
#define F(T, f)                                                              \
  std::printf("%s[\"%s\", %zu, %zu]", first ? "" : ",", #f, offsetof(T, f), \
              sizeof(((T*)0)->f)),                                          \
      first = false
int main() {
  bool first = true;
  std::printf("{\"record\": [");
  F(ovf_record, seq);
  F(ovf_record, frame_seq);
  F(ovf_record, batch);
  F(ovf_record, timestamp_ns);
  F(ovf_record, name_id);
  F(ovf_record, label_id);
  F(ovf_record, kind);
  F(ovf_record, dtype);
  F(ovf_record, device_type);
  F(ovf_record, device_index);
  F(ovf_record, flags);
  F(ovf_record, numel);
  F(ovf_record, nan_count);
  F(ovf_record, pos_inf_count);
  F(ovf_record, neg_inf_count);
  F(ovf_record, zero_count);
  F(ovf_record, abs_min);
  F(ovf_record, abs_max);
  F(ovf_record, abs_min_nonzero);
  F(ovf_record, subnormal_count);
  F(ovf_record, context_id);
  F(ovf_record, aux_id);
  F(ovf_record, headroom_dtype);
  F(ovf_record, headroom_underflow);
  F(ovf_record, diagnosis_id);
  F(ovf_record, location_id);
  F(ovf_record, scale_before);
  F(ovf_record, scale_after);
  F(ovf_record, cause_seq);
  F(ovf_record, skips_in_row);
  F(ovf_record, cast_counts);
  F(ovf_record, row_extent);
  F(ovf_record, row_count);
  F(ovf_record, rows);
  F(ovf_record, verdict_id);
  first = true;
  std::printf("], \"control\": [");
  F(ovf_control, generation);
  F(ovf_control, enabled);
  F(ovf_control, stop_mask);
  F(ovf_control, on_event);
  F(ovf_control, above);
  F(ovf_control, below);
  F(ovf_control, after_batch);
  F(ovf_control, abort_after_batch);
  F(ovf_control, trace_count);
  F(ovf_control, wait_released);
  F(ovf_control, trace_batches);
  F(ovf_control, module_glob);
  F(ovf_control, observe);
  F(ovf_control, headroom_dtype);
  F(ovf_control, scaler_max_skips);
  F(ovf_control, early_horizon);
  F(ovf_control, scale_floor);
  F(ovf_control, update_ratio_max);
  F(ovf_control, cast_target);
  F(ovf_control, cast_overflow_max);
  F(ovf_control, cast_flush_max);
  F(ovf_control, cast_subnormal_max);
  F(ovf_control, step_request);
  first = true;
  std::printf("], \"header\": [");
  F(ovf_state_t, magic);
  F(ovf_state_t, layout_version);
  F(ovf_state_t, header_size);
  F(ovf_state_t, record_size);
  F(ovf_state_t, record_capacity);
  F(ovf_state_t, records_addr);
  F(ovf_state_t, write_seq);
  F(ovf_state_t, batch);
  F(ovf_state_t, first_nonfinite_seq);
  F(ovf_state_t, last_event_seq);
  F(ovf_state_t, names_index_addr);
  F(ovf_state_t, names_arena_addr);
  F(ovf_state_t, names_capacity);
  F(ovf_state_t, names_count);
  F(ovf_state_t, names_arena_size);
  F(ovf_state_t, names_arena_used);
  F(ovf_state_t, pid);
  F(ovf_state_t, rank);
  F(ovf_state_t, local_rank);
  F(ovf_state_t, world_size);
  F(ovf_state_t, device_index);
  F(ovf_state_t, runtime_version);
  F(ovf_state_t, detection_state);
  F(ovf_state_t, max_frames_to_save);
  F(ovf_state_t, last_event_kind);
  F(ovf_state_t, frames_per_batch_hint);
  F(ovf_state_t, frames_written);
  F(ovf_state_t, start_time_ns);
  F(ovf_state_t, root_class_id);
  F(ovf_state_t, own_on_event);
  F(ovf_state_t, snapshot_addr);
  F(ovf_state_t, device_mode);
  F(ovf_state_t, device_backends);
  F(ovf_state_t, pending_frames);
  F(ovf_state_t, last_event_late);
  F(ovf_state_t, samples_addr);
  F(ovf_state_t, step_state);
  F(ovf_state_t, step_where_id);
  std::printf("], \"sizes\": {\"record\": %zu, \"control\": %zu, \"header\": %zu, "
              "\"control_offset\": %zu},",
              sizeof(ovf_record), sizeof(ovf_control), sizeof(ovf_state_t),
              offsetof(ovf_state_t, control));
  std::printf("\"constants\": {\"magic\": %llu, \"version\": %u, \"no_seq\": %llu, "
              "\"glob\": %u, \"trace\": %u}}\n",
              (unsigned long long)OVF_MAGIC, OVF_LAYOUT_VERSION, (unsigned long long)OVF_NO_SEQ,
              OVF_GLOB_SIZE, OVF_MAX_TRACE_BATCHES);
}"""

# The samples log (layout 7): what samples.py decodes, against the C structs.
SAMPLES_PROGRAM = """#include <cstddef>
#include <cstdio>
#include "ovf/ring.h"
int main() {
  std::printf("[%zu, %zu, %zu, %zu, %zu, %zu, %zu, %zu, %zu, %llu, %u, %u, %u]\\n",
              offsetof(ovf_samples_log, entries_written), offsetof(ovf_samples_log, entries),
              sizeof(ovf_samples_log), sizeof(ovf_samples_entry),
              offsetof(ovf_samples_entry, total), offsetof(ovf_samples_entry, dataset_id),
              offsetof(ovf_samples_entry, count), offsetof(ovf_samples_entry, number),
              offsetof(ovf_samples_entry, indices), (unsigned long long)OVF_SAMPLES_MAGIC,
              OVF_SAMPLES_VERSION, OVF_SAMPLES_ENTRIES, OVF_SAMPLES_PER_ENTRY);
}"""


def run_against_ring_h(work, name, program):
    """Compiles `program` (C++ including ovf/ring.h) in `work` and returns what it prints."""
    compiler = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    source, binary = work / f"{name}.cpp", work / name
    source.write_text(program)
    include = os.path.join(TOP, "runtime", "include")
    subprocess.run(
        [compiler, "-std=c++17", "-I", include, str(source), "-o", str(binary)],
        check=True,
        timeout=120,
    )
    return subprocess.run(
        [str(binary)], check=True, capture_output=True, text=True, timeout=30
    ).stdout


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return json.loads(run_against_ring_h(tmp_path_factory.mktemp("layout"), "layout", PROGRAM))


@pytest.mark.parametrize(
    "part, table",
    [
        ("record", layout.RECORD_OFFSETS),
        ("control", layout.CONTROL_OFFSETS),
        ("header", layout.HEADER_OFFSETS),
    ],
)
def test_every_field_offset_and_size(compiled, part, table):
    compiled_fields = {name: (offset, size) for name, offset, size in compiled[part]}
    assert compiled_fields == table


def test_sizes_and_constants(compiled):
    assert compiled["sizes"] == {
        "record": layout.RECORD_SIZE,
        "control": layout.CONTROL_SIZE,
        "header": layout.HEADER_SIZE,
        "control_offset": layout.CONTROL_OFFSET,
    }
    assert compiled["constants"] == {
        "magic": layout.MAGIC,
        "version": layout.LAYOUT_VERSION,
        "no_seq": layout.NO_SEQ,
        "glob": layout.GLOB_SIZE,
        "trace": layout.MAX_TRACE_BATCHES,
    }


def test_the_samples_log_decoder_agrees_with_ring_h(tmp_path):
    compiled = json.loads(run_against_ring_h(tmp_path, "samples", SAMPLES_PROGRAM))
    head = samples._HEADER.format  # "<QIIQ40x": magic, version, size, entries_written
    entry = samples._ENTRY.format  # "<QQIIQ64q": batch, total, dataset_id, count, number, ...
    assert (
        compiled
        == [
            struct.calcsize(head[:4]),  # entries_written
            samples._HEADER.size,  # entries
            samples.SIZE,
            samples._ENTRY.size,
            *(struct.calcsize(entry[:k]) for k in range(2, 7)),  # total ... indices
            samples.MAGIC,
            samples.VERSION,
            samples.ENTRIES,
            samples.PER_ENTRY,
        ]
    )


# Every member of every enum of ring.h, read from the header itself, and the
# Python name that must hold the same value (a member added in C and not in the
# readers fails here).
ENUM_MEMBER = re.compile(r"^\s+(OVF_[A-Z0-9_]+)\s*=", re.M)
PYTHON_NAME = [  # (C prefix, module, Python prefix)
    ("OVF_KIND_", layout, "KIND_"),
    ("OVF_FLAG_", layout, "FLAG_"),
    ("OVF_STOP_", layout, "STOP_"),
    ("OVF_OBSERVE_", layout, "OBSERVE_"),
    ("OVF_DEVICE_MODE_", layout, "DEVICE_MODE_"),
    ("OVF_BACKEND_", layout, "BACKEND_"),
    ("OVF_STEPPING_", layout, "STEPPING_"),
    ("OVF_STEP_", layout, "STEP_"),
    ("OVF_SNAP_USER", snapshot, "FLAG_USER"),
    ("OVF_SNAP_", snapshot, "LOCAL_"),
]


def enum_members():
    with open(os.path.join(TOP, "runtime", "include", "ovf", "ring.h")) as f:
        return ENUM_MEMBER.findall(f.read())


@pytest.fixture(scope="module")
def enum_values(tmp_path_factory):
    names = enum_members()
    program = (
        '#include <cstdio>\n#include "ovf/ring.h"\nint main() {\n'
        + "".join(f'  std::printf("{n} %llu\\n", (unsigned long long){n});\n' for n in names)
        + "}\n"
    )
    out = run_against_ring_h(tmp_path_factory.mktemp("enums"), "enums", program)
    return {name: int(value) for name, value in (line.split() for line in out.splitlines())}


def test_every_enum_value_of_the_header_is_the_readers(enum_values):
    assert len(enum_values) > 60
    for name, value in enum_values.items():
        if name.startswith("OVF_DTYPE_"):
            assert layout.DTYPE_NAMES[value], name
            continue
        if name.startswith("OVF_ON_EVENT_"):
            assert layout.ON_EVENT_NAMES[value] == name.removeprefix("OVF_ON_EVENT_").lower(), name
            continue
        if name.startswith("OVF_CAST_"):
            rest = name.removeprefix("OVF_CAST_").lower()
            if rest in ("targets", "losses"):
                assert value == len(getattr(layout, "CAST_" + rest.upper())), name
            elif rest in layout.CAST_LOSSES:
                assert layout.CAST_LOSSES[value] == rest, name
            else:  # OVF_CAST_FLOAT8_E4M3 is torch's float8_e4m3fn
                assert layout.CAST_TARGET_DTYPES[value].startswith(rest), name
            continue
        c_prefix, module, py_prefix = next(p for p in PYTHON_NAME if name.startswith(p[0]))
        python = py_prefix + name.removeprefix(c_prefix) if c_prefix.endswith("_") else py_prefix
        assert getattr(module, python) == value, (
            f"{name} = {value} in ring.h, {module.__name__}.{python}"
        )
    dtypes = [v for n, v in enum_values.items() if n.startswith("OVF_DTYPE_")]
    assert len(layout.DTYPE_NAMES) == max(dtypes) + 1


def test_the_runtimes_names_of_stop_and_observe_bits_are_the_readers():
    from ovf import _ovf  # the C++ tables (control.cpp) the Python API and OVF_* variables use

    assert dict(_ovf.STOP_BITS) == dict(layout.STOP_NAMES)
    assert _ovf.OBSERVE_BITS["ops"] == layout.OBSERVE_OPS
    assert _ovf.OBSERVE_BITS["backward"] == layout.OBSERVE_BACKWARD
    assert _ovf.OBSERVE_BITS["cast"] == layout.OBSERVE_CAST
    assert dict(_ovf.CAST_TARGETS) == {n: i for i, n in enumerate(layout.CAST_TARGETS)}
    assert dict(_ovf.ON_EVENT) == {n: i for i, n in enumerate(layout.ON_EVENT_NAMES)}


# docs/ring-layout.md documents the same layout by hand: its tables must agree
# with the compiled header, row by row (a field added to ring.h and not to the
# document, or a moved one, fails here).
DOC_ROW = re.compile(r"^\| (\+?\d+) \| ([^|]+) \| (\w+) \|", re.M)
DOC_TYPE_SIZE = {"u8": 1, "i8": 1, "u32": 4, "i32": 4, "f64": 8, "u64": 8, "i64": 8}


def _doc_size(kind):
    kind = kind.strip()
    array = re.fullmatch(r"(\w+)\[(\d+)\]", kind)
    if array:
        return DOC_TYPE_SIZE.get(array.group(1), 1) * int(array.group(2))
    nbytes = re.fullmatch(r"(\d+) bytes", kind)
    return int(nbytes.group(1)) if nbytes else DOC_TYPE_SIZE[kind]


def _doc_tables():
    """{"header"|"control"|"record": {field: (offset, size)}} from the document."""
    with open(os.path.join(TOP, "docs", "ring-layout.md")) as f:
        text = f.read()
    sections = {
        "header": text.index("## Header"),
        "control": text.index("## Control block"),
        "record": text.index("## Records"),
        "end": text.index("## The event snapshot"),
    }
    order = sorted(sections.items(), key=lambda kv: kv[1])
    tables = {}
    for (name, start), (_, end) in zip(order, order[1:], strict=False):
        tables[name] = {
            field: (int(offset.lstrip("+")), _doc_size(kind))
            for offset, kind, field in DOC_ROW.findall(text[start:end])
        }
    return tables


def test_the_layout_document_agrees_with_the_header(compiled):
    doc = _doc_tables()
    for part in ("record", "control", "header"):
        fields = {name: (offset, size) for name, offset, size in compiled[part]}
        documented = {k: v for k, v in doc[part].items() if k not in ("reserved", "control")}
        assert documented == fields, part
    assert doc["header"]["control"][0] == compiled["sizes"]["control_offset"]
    assert (
        f"# The frame ring: layout version {compiled['constants']['version']}"
        in open(os.path.join(TOP, "docs", "ring-layout.md")).read()
    )
