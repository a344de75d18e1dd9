"""The decoder's field tables against the compiled ring.h, field by field."""

import json
import os
import shutil
import subprocess
import sys

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "plugin"))

from ovf_plugin import layout  # noqa: E402

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
  std::printf("], \"sizes\": {\"record\": %zu, \"control\": %zu, \"header\": %zu, "
              "\"control_offset\": %zu},",
              sizeof(ovf_record), sizeof(ovf_control), sizeof(ovf_state_t),
              offsetof(ovf_state_t, control));
  std::printf("\"constants\": {\"magic\": %llu, \"version\": %u, \"no_seq\": %llu, "
              "\"glob\": %u, \"trace\": %u}}\n",
              (unsigned long long)OVF_MAGIC, OVF_LAYOUT_VERSION, (unsigned long long)OVF_NO_SEQ,
              OVF_GLOB_SIZE, OVF_MAX_TRACE_BATCHES);
}"""


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    compiler = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    work = tmp_path_factory.mktemp("layout")
    source = work / "layout.cpp"
    source.write_text(PROGRAM)
    binary = work / "layout"
    subprocess.run(
        [
            compiler,
            "-std=c++17",
            "-I",
            os.path.join(TOP, "runtime", "include"),
            str(source),
            "-o",
            str(binary),
        ],
        check=True,
        timeout=120,
    )
    return json.loads(
        subprocess.run([str(binary)], check=True, capture_output=True, text=True, timeout=30).stdout
    )


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
