"""Every field of ring.h's record, control block and header: name, offset and
struct code, one table each, that layout.py builds its decoders, control-block
writes and layout checks from (a test compiles ring.h and compares each)."""

GLOB_SIZE = 256
MAX_TRACE_BATCHES = 32
ROWS_KEPT = 6  # a record's rows (layout 7)

RECORD_FIELDS = (
    ("seq", 0, "Q"),
    ("frame_seq", 8, "Q"),
    ("batch", 16, "Q"),
    ("timestamp_ns", 24, "Q"),
    ("name_id", 32, "I"),
    ("label_id", 36, "I"),
    ("kind", 40, "B"),
    ("dtype", 41, "B"),
    ("device_type", 42, "B"),
    ("device_index", 43, "b"),
    ("flags", 44, "I"),
    ("numel", 48, "Q"),
    ("nan_count", 56, "Q"),
    ("pos_inf_count", 64, "Q"),
    ("neg_inf_count", 72, "Q"),
    ("zero_count", 80, "Q"),
    ("abs_min", 88, "d"),
    ("abs_max", 96, "d"),
    ("abs_min_nonzero", 104, "d"),
    ("subnormal_count", 112, "Q"),
    ("context_id", 120, "I"),
    ("aux_id", 124, "I"),
    ("headroom_dtype", 128, "I"),
    ("headroom_underflow", 132, "I"),
    ("diagnosis_id", 136, "I"),
    ("location_id", 140, "I"),
    ("scale_before", 144, "d"),  # layout 4: SCALER records
    ("scale_after", 152, "d"),
    ("cause_seq", 160, "Q"),
    ("skips_in_row", 168, "I"),
    ("cast_counts", 172, "12I"),  # layout 6: one tuple, index target * 3 + loss
    ("row_extent", 220, "I"),  # layout 7: the first non-finite line's first dimension
    ("row_count", 224, "I"),  # ... its rows holding a NaN/Inf
    ("rows", 228, f"{ROWS_KEPT}I"),  # ... the first of them, one tuple
    ("verdict_id", 252, "I"),  # layout 8: a producing op re-run on its inputs, in one line
)

CONTROL_FIELDS = (
    ("generation", 0, "I"),
    ("enabled", 4, "I"),
    ("stop_mask", 8, "I"),
    ("on_event", 12, "I"),
    ("above", 16, "d"),
    ("below", 24, "d"),
    ("after_batch", 32, "q"),
    ("abort_after_batch", 40, "q"),
    ("trace_count", 48, "I"),
    ("wait_released", 52, "I"),
    ("trace_batches", 56, f"{MAX_TRACE_BATCHES}q"),
    ("module_glob", 312, f"{GLOB_SIZE}s"),
    ("observe", 568, "I"),
    ("headroom_dtype", 572, "I"),
    ("scaler_max_skips", 576, "I"),  # layout 4
    ("early_horizon", 580, "I"),  # layout 5
    ("scale_floor", 584, "d"),
    ("update_ratio_max", 592, "d"),  # layout 5
    ("cast_target", 600, "I"),  # layout 6
    ("cast_overflow_max", 608, "d"),
    ("cast_flush_max", 616, "d"),
    ("cast_subnormal_max", 624, "d"),
    ("step_request", 632, "I"),  # layout 9
)

HEADER_FIELDS = (
    ("magic", 0, "Q"),
    ("layout_version", 8, "I"),
    ("header_size", 12, "I"),
    ("record_size", 16, "I"),
    ("record_capacity", 20, "I"),
    ("records_addr", 24, "Q"),
    ("write_seq", 32, "Q"),
    ("batch", 40, "Q"),
    ("first_nonfinite_seq", 48, "Q"),
    ("last_event_seq", 56, "Q"),
    ("names_index_addr", 64, "Q"),
    ("names_arena_addr", 72, "Q"),
    ("names_capacity", 80, "I"),
    ("names_count", 84, "I"),
    ("names_arena_size", 88, "I"),
    ("names_arena_used", 92, "I"),
    ("pid", 96, "i"),
    ("rank", 100, "i"),
    ("local_rank", 104, "i"),
    ("world_size", 108, "i"),
    ("device_index", 112, "i"),
    ("runtime_version", 116, "I"),
    ("detection_state", 120, "I"),
    ("max_frames_to_save", 124, "I"),
    ("last_event_kind", 128, "I"),
    ("frames_per_batch_hint", 132, "I"),
    ("frames_written", 136, "Q"),
    ("start_time_ns", 144, "Q"),
    ("root_class_id", 152, "I"),
    ("own_on_event", 156, "I"),
    ("snapshot_addr", 160, "Q"),
    ("device_mode", 168, "I"),
    ("device_backends", 172, "I"),
    ("pending_frames", 176, "I"),
    ("last_event_late", 180, "I"),
    ("samples_addr", 184, "Q"),  # layout 7 (zero before)
    ("step_state", 192, "I"),  # layout 9
    ("step_where_id", 196, "I"),
)
