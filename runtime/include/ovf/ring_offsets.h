// The ring's offsets as static_asserts: ring.h includes this for C++ (the
// runtime and every test compile it), so a field that moves fails the build.
// The numbers are the layout documented in docs/ring-layout.md; the plugin
// decodes the same bytes (plugin/ovf_ring/layout.py).
#ifndef OVF_RING_OFFSETS_H
#define OVF_RING_OFFSETS_H

#include "ring.h"

static_assert(sizeof(ovf_record) == OVF_RECORD_SIZE, "record size is part of the layout");
static_assert(offsetof(ovf_record, frame_seq) == 8, "layout");
static_assert(offsetof(ovf_record, batch) == 16, "layout");
static_assert(offsetof(ovf_record, timestamp_ns) == 24, "layout");
static_assert(offsetof(ovf_record, name_id) == 32, "layout");
static_assert(offsetof(ovf_record, label_id) == 36, "layout");
static_assert(offsetof(ovf_record, kind) == 40, "layout");
static_assert(offsetof(ovf_record, dtype) == 41, "layout");
static_assert(offsetof(ovf_record, device_type) == 42, "layout");
static_assert(offsetof(ovf_record, device_index) == 43, "layout");
static_assert(offsetof(ovf_record, flags) == 44, "layout");
static_assert(offsetof(ovf_record, numel) == 48, "layout");
static_assert(offsetof(ovf_record, nan_count) == 56, "layout");
static_assert(offsetof(ovf_record, pos_inf_count) == 64, "layout");
static_assert(offsetof(ovf_record, neg_inf_count) == 72, "layout");
static_assert(offsetof(ovf_record, zero_count) == 80, "layout");
static_assert(offsetof(ovf_record, abs_min) == 88, "layout");
static_assert(offsetof(ovf_record, abs_max) == 96, "layout");
static_assert(offsetof(ovf_record, abs_min_nonzero) == 104, "layout");
static_assert(offsetof(ovf_record, subnormal_count) == 112, "layout");
static_assert(offsetof(ovf_record, context_id) == 120, "layout");
static_assert(offsetof(ovf_record, aux_id) == 124, "layout");
static_assert(offsetof(ovf_record, headroom_dtype) == 128, "layout");
static_assert(offsetof(ovf_record, headroom_underflow) == 132, "layout");
static_assert(offsetof(ovf_record, diagnosis_id) == 136, "layout");
static_assert(offsetof(ovf_record, location_id) == 140, "layout");
static_assert(offsetof(ovf_record, scale_before) == 144, "layout");
static_assert(offsetof(ovf_record, scale_after) == 152, "layout");
static_assert(offsetof(ovf_record, cause_seq) == 160, "layout");
static_assert(offsetof(ovf_record, skips_in_row) == 168, "layout");
static_assert(offsetof(ovf_record, cast_counts) == 172, "layout");
static_assert(offsetof(ovf_record, row_extent) == 220, "layout");
static_assert(offsetof(ovf_record, row_count) == 224, "layout");
static_assert(offsetof(ovf_record, rows) == 228, "layout");
static_assert(offsetof(ovf_record, verdict_id) == 252, "layout");

static_assert(sizeof(ovf_control) == OVF_CONTROL_SIZE, "control block size is part of the layout");
static_assert(offsetof(ovf_control, enabled) == 4, "layout");
static_assert(offsetof(ovf_control, stop_mask) == 8, "layout");
static_assert(offsetof(ovf_control, on_event) == 12, "layout");
static_assert(offsetof(ovf_control, above) == 16, "layout");
static_assert(offsetof(ovf_control, below) == 24, "layout");
static_assert(offsetof(ovf_control, after_batch) == 32, "layout");
static_assert(offsetof(ovf_control, abort_after_batch) == 40, "layout");
static_assert(offsetof(ovf_control, trace_count) == 48, "layout");
static_assert(offsetof(ovf_control, wait_released) == 52, "layout");
static_assert(offsetof(ovf_control, trace_batches) == 56, "layout");
static_assert(offsetof(ovf_control, module_glob) == 312, "layout");
static_assert(offsetof(ovf_control, observe) == 568, "layout");
static_assert(offsetof(ovf_control, headroom_dtype) == 572, "layout");
static_assert(offsetof(ovf_control, scaler_max_skips) == 576, "layout");
static_assert(offsetof(ovf_control, early_horizon) == 580, "layout");
static_assert(offsetof(ovf_control, scale_floor) == 584, "layout");
static_assert(offsetof(ovf_control, update_ratio_max) == 592, "layout");
static_assert(offsetof(ovf_control, cast_target) == 600, "layout");
static_assert(offsetof(ovf_control, cast_overflow_max) == 608, "layout");
static_assert(offsetof(ovf_control, cast_flush_max) == 616, "layout");
static_assert(offsetof(ovf_control, cast_subnormal_max) == 624, "layout");
static_assert(offsetof(ovf_control, step_request) == 632, "layout");

static_assert(sizeof(ovf_snapshot_frame) == 16, "layout");
static_assert(sizeof(ovf_snapshot_local) == 136, "layout");
static_assert(offsetof(ovf_snapshot_local, shape) == 16, "layout");
static_assert(offsetof(ovf_snapshot_local, numel) == 80, "layout");
static_assert(offsetof(ovf_snapshot_local, abs_max) == 128, "layout");
static_assert(offsetof(ovf_snapshot, event_seq) == 16, "layout");
static_assert(offsetof(ovf_snapshot, complete) == 32, "layout");
static_assert(offsetof(ovf_snapshot, frames) == 64, "layout");
static_assert(offsetof(ovf_snapshot, frame_locals) == 40, "layout");
static_assert(offsetof(ovf_snapshot, locals) == 1088, "layout");
static_assert(sizeof(ovf_samples_entry) == 544, "layout");
static_assert(offsetof(ovf_samples_entry, dataset_id) == 16, "layout");
static_assert(offsetof(ovf_samples_entry, count) == 20, "layout");
static_assert(offsetof(ovf_samples_entry, number) == 24, "layout");
static_assert(offsetof(ovf_samples_entry, indices) == 32, "layout");
static_assert(offsetof(ovf_samples_log, entries_written) == 16, "layout");
static_assert(offsetof(ovf_samples_log, entries) == 64, "layout");
static_assert(sizeof(ovf_samples_log) == 64 + 16 * 544, "layout");
static_assert(sizeof(ovf_snapshot) == 1088 + 136 * OVF_SNAPSHOT_LOCALS, "layout");

static_assert(sizeof(ovf_state_t) == OVF_HEADER_SIZE, "header size is part of the layout");
static_assert(offsetof(ovf_state_t, layout_version) == 8, "layout");
static_assert(offsetof(ovf_state_t, header_size) == 12, "layout");
static_assert(offsetof(ovf_state_t, record_size) == 16, "layout");
static_assert(offsetof(ovf_state_t, record_capacity) == 20, "layout");
static_assert(offsetof(ovf_state_t, records_addr) == 24, "layout");
static_assert(offsetof(ovf_state_t, write_seq) == 32, "layout");
static_assert(offsetof(ovf_state_t, batch) == 40, "layout");
static_assert(offsetof(ovf_state_t, first_nonfinite_seq) == 48, "layout");
static_assert(offsetof(ovf_state_t, last_event_seq) == 56, "layout");
static_assert(offsetof(ovf_state_t, names_index_addr) == 64, "layout");
static_assert(offsetof(ovf_state_t, names_arena_addr) == 72, "layout");
static_assert(offsetof(ovf_state_t, names_capacity) == 80, "layout");
static_assert(offsetof(ovf_state_t, names_count) == 84, "layout");
static_assert(offsetof(ovf_state_t, names_arena_size) == 88, "layout");
static_assert(offsetof(ovf_state_t, names_arena_used) == 92, "layout");
static_assert(offsetof(ovf_state_t, pid) == 96, "layout");
static_assert(offsetof(ovf_state_t, rank) == 100, "layout");
static_assert(offsetof(ovf_state_t, local_rank) == 104, "layout");
static_assert(offsetof(ovf_state_t, world_size) == 108, "layout");
static_assert(offsetof(ovf_state_t, device_index) == 112, "layout");
static_assert(offsetof(ovf_state_t, runtime_version) == 116, "layout");
static_assert(offsetof(ovf_state_t, detection_state) == 120, "layout");
static_assert(offsetof(ovf_state_t, max_frames_to_save) == 124, "layout");
static_assert(offsetof(ovf_state_t, last_event_kind) == 128, "layout");
static_assert(offsetof(ovf_state_t, frames_per_batch_hint) == 132, "layout");
static_assert(offsetof(ovf_state_t, frames_written) == 136, "layout");
static_assert(offsetof(ovf_state_t, start_time_ns) == 144, "layout");
static_assert(offsetof(ovf_state_t, root_class_id) == 152, "layout");
static_assert(offsetof(ovf_state_t, own_on_event) == 156, "layout");
static_assert(offsetof(ovf_state_t, snapshot_addr) == 160, "layout");
static_assert(offsetof(ovf_state_t, device_mode) == 168, "layout");
static_assert(offsetof(ovf_state_t, device_backends) == 172, "layout");
static_assert(offsetof(ovf_state_t, pending_frames) == 176, "layout");
static_assert(offsetof(ovf_state_t, last_event_late) == 180, "layout");
static_assert(offsetof(ovf_state_t, samples_addr) == 184, "layout");
static_assert(offsetof(ovf_state_t, step_state) == 192, "layout");
static_assert(offsetof(ovf_state_t, step_where_id) == 196, "layout");
static_assert(offsetof(ovf_state_t, control) == OVF_CONTROL_OFFSET, "layout");

#endif  // OVF_RING_OFFSETS_H
