// The pybind11 module `ovf._ovf`: binds the Python driver (py_hooks.h) and the
// controls the ovf package uses. Only binding here.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstring>

#include "control.h"
#include "cuda_backend.h"
#include "device_batch.h"
#include "device_engine.h"
#include "event_summary.h"
#include "known_finite.h"
#include "monitor.h"
#include "op_groups.h"
#include "op_observer.h"
#include "py_hooks.h"
#include "py_replay.h"
#include "py_response.h"
#include "py_snapshot.h"
#include "recent_stats.h"
#include "report.h"
#include "response.h"
#include "ring_writer.h"
#include "sample_log.h"
#include "stats_cpu.h"
#include "torch_tensor.h"
#include "version.h"

namespace py = pybind11;

namespace {

py::dict stats_dict(const ovf::Stats& s) {
  py::dict d;
  d["has_stats"] = s.has_stats;
  d["numel"] = s.numel;
  d["nan"] = s.nan_count;
  d["pos_inf"] = s.pos_inf_count;
  d["neg_inf"] = s.neg_inf_count;
  d["zero"] = s.zero_count;
  d["subnormal"] = s.subnormal_count;
  d["abs_min"] = s.abs_min;
  d["abs_max"] = s.abs_max;
  d["abs_min_nonzero"] = s.abs_min_nonzero;
  if (s.has_cast) {
    py::dict cast;
    for (int t = 0; t < OVF_CAST_TARGETS; ++t) {
      py::dict losses;
      losses["overflow"] = s.cast.at(t, OVF_CAST_OVERFLOW);
      losses["flush"] = s.cast.at(t, OVF_CAST_FLUSH);
      losses["subnormal"] = s.cast.at(t, OVF_CAST_SUBNORMAL);
      cast[ovf::cast_target_name(t)] = losses;
    }
    d["cast"] = cast;
  }
  return d;
}

const at::Tensor& tensor_argument(py::handle obj, const char* function) {
  if (!THPVariable_Check(obj.ptr()))
    throw py::type_error(std::string("ovf: ") + function + "() takes a torch.Tensor");
  return THPVariable_Unpack(obj.ptr());
}

py::object tensor_stats(py::handle obj, bool casts) {
  ovf::TensorView view;
  if (!ovf::readable_view(tensor_argument(obj, "stats"), &view)) return py::none();
  return stats_dict(ovf::compute_stats_cpu(view, casts));
}

// The device engine's statistics of a tensor on any device (the portable
// backend, or CUDA's), waited for: what tests compare with the CPU engine.
py::object device_stats(py::handle obj, bool casts) {
  const at::Tensor& t = tensor_argument(obj, "device_stats");
  ovf::TensorView view;
  if (!ovf::device_view(t, &view)) return py::none();
  return stats_dict(ovf::device_stats_now(t, view.dtype, casts));
}

// _ovf.set_control(field=value, ...): the control block fields the Python API sets.
void set_control(py::kwargs fields) {
  ovf_control& c = ovf_state.control;
  for (auto item : fields) {
    const std::string key = py::str(item.first);
    py::handle v = item.second;
    if (key == "enabled")
      c.enabled = v.cast<bool>();
    else if (key == "stop_mask")
      c.stop_mask = v.cast<uint32_t>();
    else if (key == "on_event")
      c.on_event = v.cast<uint32_t>();
    else if (key == "above")
      c.above = v.cast<double>();
    else if (key == "below")
      c.below = v.cast<double>();
    else if (key == "after_batch")
      c.after_batch = v.cast<int64_t>();
    else if (key == "observe")
      c.observe = v.cast<uint32_t>();
    else if (key == "headroom_dtype")
      c.headroom_dtype = v.cast<uint32_t>();
    else if (key == "scaler_max_skips")
      c.scaler_max_skips = v.cast<uint32_t>();
    else if (key == "scale_floor")
      c.scale_floor = v.cast<double>();
    else if (key == "early_horizon")
      c.early_horizon = v.cast<uint32_t>();
    else if (key == "update_ratio_max")
      c.update_ratio_max = v.cast<double>();
    else if (key == "cast_target")
      c.cast_target = v.cast<uint32_t>();
    else if (key == "cast_overflow_max")
      c.cast_overflow_max = v.cast<double>();
    else if (key == "cast_flush_max")
      c.cast_flush_max = v.cast<double>();
    else if (key == "cast_subnormal_max")
      c.cast_subnormal_max = v.cast<double>();
    else if (key == "module_glob") {
      const std::string error = ovf::write_module_glob(v.cast<std::string>());
      if (!error.empty()) throw py::value_error(error);
    } else {
      throw py::type_error("ovf: unknown control field '" + key + "'");
    }
  }
  c.generation++;
}

py::dict control() {
  const ovf_control& c = ovf_state.control;
  py::dict d;
  d["enabled"] = static_cast<bool>(c.enabled);
  d["stop_mask"] = c.stop_mask;
  d["on_event"] = ovf::on_event_name(c.on_event);
  d["above"] = c.above;
  d["below"] = c.below;
  d["after_batch"] = c.after_batch;
  d["abort_after_batch"] = c.abort_after_batch;
  d["module_glob"] = std::string(c.module_glob, strnlen(c.module_glob, OVF_GLOB_SIZE));
  d["observe"] = c.observe;
  d["headroom_dtype"] = c.headroom_dtype;
  d["scaler_max_skips"] = c.scaler_max_skips;
  d["scale_floor"] = c.scale_floor;
  d["early_horizon"] = c.early_horizon;
  d["update_ratio_max"] = c.update_ratio_max;
  d["cast_target"] = c.cast_target;
  d["cast_overflow_max"] = c.cast_overflow_max;
  d["cast_flush_max"] = c.cast_flush_max;
  d["cast_subnormal_max"] = c.cast_subnormal_max;
  return d;
}

template <size_t N>
py::dict bit_names(const ovf::NamedBit (&table)[N]) {
  py::dict d;
  for (const ovf::NamedBit& entry : table) d[entry.name] = entry.bit;
  return d;
}

}  // namespace

PYBIND11_MODULE(_ovf, m) {
  m.doc() = "ovf runtime: module hooks feeding the frame ring (see ovf/__init__.py for the API)";
  m.attr("__version__") = OVF_VERSION_STRING;
  m.attr("LAYOUT_VERSION") = OVF_LAYOUT_VERSION;
  m.attr("OVERFLOW_MESSAGE") = ovf::kOverflowMessage;

  m.def("forward_hook", &ovf::forward_hook,
        "Forward hook (module, args, kwargs, output) of a watched module (with_kwargs=True).");
  m.def("forward_hook_positional", &ovf::forward_hook_positional,
        "Forward hook (module, args, output): what the reference's hooks see.");
  m.def("compiled_forward_hook", &ovf::compiled_forward_hook,
        "Forward hook (module, args, output) of a frame inside a torch.compile'd graph.");
  m.def("forward_pre_hook", &ovf::forward_pre_hook,
        "Forward pre-hook: names new modules (auto mode), tracks the module stack.");
  m.def("watch_module", &ovf::watch_module, py::arg("module"), py::arg("name"), py::arg("is_root"),
        py::arg("step_root") = false);
  m.def("watched_name", &ovf::watched_name, py::arg("module"));
  m.def("set_op_site",
        py::overload_cast<py::handle, const std::string&, py::handle>(&ovf::set_op_site),
        py::arg("module_name"), py::arg("location"), py::arg("gradient_of") = py::none(),
        "The module and line the next ops on this thread are named by (a compiled graph's "
        "node run again eagerly); None and \"\" go back to the module stack's and Python's.");
  m.def(
      "set_step_end",
      [](uint32_t rule) {
        if (rule > uint32_t(ovf::StepEnd::kOptimizerRound))
          throw py::value_error("ovf: set_step_end takes one of STEP_ENDS' values");
        ovf::Monitor::instance().set_step_end(static_cast<ovf::StepEnd>(rule));
      },
      "What ends a training step from now on (step_clock.h): STEP_ENDS['repeated_forward'], "
      "['backward'] or ['optimizer_round'].");
  m.attr("STEP_ENDS") =
      py::dict(py::arg("repeated_forward") = uint32_t(ovf::StepEnd::kRepeatedForward),
               py::arg("backward") = uint32_t(ovf::StepEnd::kBackward),
               py::arg("optimizer_round") = uint32_t(ovf::StepEnd::kOptimizerRound));
  m.def("set_event_condition", &ovf::set_event_condition, py::arg("condition"),
        "condition(seq, events) -> bool decides each NaN/Inf/backward event (--if); None: "
        "every event stands.");
  m.def(
      "end_step", [](bool now) { ovf::Monitor::instance().end_step(now); }, py::arg("now") = false,
      "The event that ends a training step happened: the next step root's forward begins one "
      "(now=True: the next step begins here).");
  m.def(
      "set_gradients_pending",
      [](bool pending) { ovf::Monitor::instance().set_gradients_pending(pending); },
      py::arg("pending"),
      "A backward() made gradients no optimizer step has applied yet (True), an optimizer "
      "stepped (False): while they are pending, the line that began the step calling its model "
      "again with gradients on begins the next one.");
  m.def("deliver_pending_raise", &ovf::deliver_pending_raise);
  m.def("set_generated_code_dir", &ovf::set_generated_code_dir, py::arg("dir"),
        "Inductor's cache directory: its generated code's frames are not the program's.");
  m.def("hold_op_raises", &ovf::hold_op_raises, py::arg("held"),
        "While held, a raise decided at an op waits for deliver_pending_raise (or the next "
        "hook) instead of reaching the thread asynchronously.");
  m.def(
      "record_batch_samples",
      [](uint64_t loader, const std::string& dataset, const std::vector<int64_t>& indices,
         bool one_late) {
        ovf::record_batch_samples(loader, dataset, indices.data(), indices.size(), one_late);
      },
      py::arg("loader"), py::arg("dataset"), py::arg("indices"), py::arg("one_late") = false,
      "The batch being run was loaded from these dataset indices (its sampler's, in order); "
      "one_late: the loop that asked hands it out after fetching the next one.");
  m.def("release_late_samples", &ovf::release_late_samples, py::arg("loader"),
        "The loader has no batch left: a one-late loop hands out the last it fetched.");
  m.def("forget_sample_loader", &ovf::forget_sample_loader, py::arg("loader"));
  m.def(
      "first_nonfinite",
      []() -> py::object {
        const ovf_record* first =
            ovf::find_record(__atomic_load_n(&ovf_state.first_nonfinite_seq, __ATOMIC_ACQUIRE));
        if (first == nullptr) return py::none();
        return py::make_tuple(first->seq, first->batch);
      },
      "(seq, batch) of the session's first non-finite record, or None (none yet, or "
      "overwritten).");
  m.def("describe_first_nonfinite", &ovf::describe_first_nonfinite,
        "What the report says of the first non-finite value (its op, line, rows), or \"\".");
  m.def(
      "batch_samples",
      [](uint64_t batch) {
        py::list out;
        for (const ovf::BatchSamples& s : ovf::samples_of_batch(batch))
          out.append(py::dict(py::arg("dataset") = s.dataset, py::arg("total") = s.total,
                              py::arg("indices") = s.indices));
        return out;
      },
      py::arg("batch"), "The dataset indices kept of `batch`: [{dataset, total, indices}].");
  m.def("set_event_summary_dir", &ovf::set_event_summary_dir, py::arg("directory"),
        "Where the process's first NaN/Inf event leaves its summary for python3 -m ovf.ranks "
        "(\"\": nowhere).");
  m.def("after_optimizer_step", &ovf::after_optimizer_step,
        "Checks an optimizer's parameters after its step; records the non-finite ones.");
  m.def("is_watched", &ovf::is_watched);
  m.def("set_wait_timeout", &ovf::set_wait_timeout, py::arg("seconds"));
  m.def("clear_modules", &ovf::clear_modules);
  m.def("set_callbacks", &ovf::set_python_callbacks);
  m.def(
      "start_session",
      [](uint32_t max_frames, std::vector<int64_t> trace, int64_t abort_after, uint32_t on_event,
         uint32_t device_mode, bool training_steps) {
        ovf::SessionOptions o;
        o.count_training_steps = training_steps;
        if (device_mode != OVF_DEVICE_MODE_FAST && device_mode != OVF_DEVICE_MODE_EXACT)
          throw py::value_error("ovf: device_mode must be DEVICE_MODES['fast'] or ['exact']");
        o.device_mode = static_cast<ovf_device_mode>(device_mode);
        o.max_frames_to_save = max_frames;
        o.trace_batch_nums = std::move(trace);
        o.abort_after_batch_num = abort_after;
        o.on_event = static_cast<ovf_on_event>(on_event);
        const std::string error = ovf::Monitor::instance().start_session(o);
        if (!error.empty()) throw py::value_error("ovf: " + error);
        ovf::note_cuda_backend();
      },
      py::arg("max_frames"), py::arg("trace"), py::arg("abort_after"), py::arg("on_event"),
      py::arg("device_mode") = int(OVF_DEVICE_MODE_FAST), py::arg("training_steps") = false);
  m.def("stop_session", [] {
    ovf::flush_op_groups_unlocked();
    ovf::Monitor::instance().stop_session();
  });
  m.def(
      "_op_group_counts",
      [] {
        const ovf::OpGroupCounts c = ovf::op_group_counts();
        return py::make_tuple(c.waits, c.device_groups);
      },
      "Test hook: (host waits for op statistics, groups with device statistics) so far.");
  m.def("_device_waits", &ovf::TensorStatsBatch::waits,
        "Test hook: waits for device statistics not arrived yet, so far.");
  m.def("_device_row_reads", &ovf::TensorStatsBatch::row_reads,
        "Test hook: device tensors whose rows were read again (rows()), so far.");
  m.def("_known_finite_hits", &ovf::known_finite_hits,
        "Test hook: in-place ops' written inputs on this thread judged without a scan (known "
        "finite since an earlier op's output and unchanged), so far.");
  m.def("_recent_stats_hits", &ovf::recent_stats_hits,
        "Test hook: module inputs and outputs on this thread whose statistics an earlier hook "
        "of the same forward read (recent_stats.h), so far.");
  m.def("_use_recent_stats", &ovf::use_recent_stats, py::arg("on"),
        "Benchmark hook: module hooks read every input and output again (False), or take "
        "what an earlier hook of the forward read (True, the default).");
  m.def("flush_device_frames", &ovf::flush_device_frames,
        "Waits for every frame whose device statistics are on their way and judges it "
        "(the end of a session, the process's exit): prints what it reports, never raises; "
        "returns the exit status due (1: a raise no code is left to raise, 130: Ctrl-C "
        "ended a wait, 0: none).");
  m.def(
      "went_on_after_nonfinite", [] { return ovf::Monitor::instance().went_on_after_nonfinite(); },
      "Whether on_nan='warn' reported a NaN/Inf in this process and training went on (the "
      "exit judge then makes the exit status 1).");
  m.def("cuda_backend_built", &ovf::cuda_backend_built,
        "Whether this build holds the CUDA statistics backend (its torch glue).");
  m.attr("DEVICE_MODES") = py::dict(py::arg("fast") = int(OVF_DEVICE_MODE_FAST),
                                    py::arg("exact") = int(OVF_DEVICE_MODE_EXACT));
  m.def("detect_overflow", &ovf::detect_overflow, py::arg("var"), py::arg("ctx"));
  m.def("stats", &tensor_stats, py::arg("tensor"), py::arg("casts") = false,
        "One-pass stats of a CPU tensor as a dict (None if unreadable); casts: with what "
        "casts to the narrow types would lose (key 'cast').");
  m.def("scan_loops", &ovf::scan_loops_name,
        "The copy of the CPU engine's loops this process runs: base, avx2, avx2+avx512-counts.");
  m.def("device_stats", &device_stats, py::arg("tensor"), py::arg("casts") = false,
        "The device engine's stats of a tensor on any device, as a dict (None if unreadable).");
  m.def("configure_ring", [](uint32_t capacity) {
    ovf::RingConfig config;
    config.record_capacity = capacity;
    const std::string error = ovf::ring_configure(config);
    if (!error.empty()) throw py::value_error("ovf: " + error);
  });
  m.def("ring_capacity_refusal", &ovf::ring_capacity_refusal, py::arg("capacity"),
        "Why a ring of that many records is too big for this machine, or \"\".");
  m.def("state_address", [] { return reinterpret_cast<uintptr_t>(&ovf_state); });
  m.def("report", [](uint32_t frames) {
    uint32_t found = 0;
    const uint64_t end = __atomic_load_n(&ovf_state.write_seq, __ATOMIC_ACQUIRE);
    return ovf::format_frames(ovf::last_frames(0, end, frames, &found));
  });
  m.def("format_8_2e", &ovf::format_8_2e);
  m.def("batch", [] { return ovf_state.batch; });
  m.def("enable_core_dumps", &ovf::enable_core_dumps);
  m.def("set_control", &set_control);
  m.def(
      "expect_nonfinite", [](bool enter) { ovf::Monitor::instance().expect_nonfinite(enter); },
      py::arg("enter"), "Enters (True) or leaves (False) a region where NaN/Inf is expected.");
  m.def("control", &control);
  m.def("scaler_update", &ovf::scaler_update, py::arg("scaler_class"), py::arg("optimizers"),
        py::arg("scale_before"), py::arg("scale_after"), py::arg("skipped"),
        "GradScaler.update(): records a skipped step or a change of scale.");
  m.def("update_ratio", &ovf::update_ratio, py::arg("optimizer_class"), py::arg("parameter"),
        py::arg("index"), py::arg("ratio"), py::arg("parameter_ratio"),
        "optimizer.step(): its update-to-weight ratio, for the early warning (--early).");
  m.def("sync_op_observer", &ovf::sync_op_observer,
        "Arms or disarms the op observer per control.observe.");
  m.def("set_replay", &ovf::set_replay, py::arg("replay"),
        "replay(frame_seq, batch, compiled) -> str runs at a module event holding the first "
        "NaN/Inf.");
  m.def("begin_replay", &ovf::begin_replay, py::arg("backward") = false,
        "The replay's forward begins: its records decide nothing, its ops are observed "
        "(backward: and those of its backward).");
  m.def("set_step", &ovf::set_step, py::arg("step"),
        "step(frame_seq) -> str replays the step for a debugger's `ovf step-into`; None: off");
  m.def("step_stop", &ovf::step_stop, py::arg("frame"), py::arg("where"), py::arg("state"),
        "A stop at a line of the stepping pass (the debugger's breakpoint): returns its "
        "request, enum ovf_step_request");
  m.def("replaying", &ovf::replaying);
  m.def("replay_found", &ovf::replay_found,
        "Whether the replay has seen the op that made its first non-finite value.");
  m.def("replay_producer", &ovf::replay_producer,
        "(op, module path, line) of the replay's producing op, or None.");

  // The contract's values by name, as ring.h defines them (control.cpp's tables).
  py::dict on_event;
  for (uint32_t code = OVF_ON_EVENT_RAISE; code <= OVF_ON_EVENT_CONTINUE; ++code) {
    on_event[ovf::on_event_name(code)] = code;
  }
  m.attr("ON_EVENT") = on_event;
  m.attr("STOP_BITS") = bit_names(ovf::kStopBitNames);
  m.attr("OBSERVE_BITS") = bit_names(ovf::kObserveBitNames);
  // Cast targets (ring.h's ovf_cast_target) by the names --cast takes.
  m.attr("CAST_TARGETS") =
      py::dict(py::arg("fp16") = int(OVF_CAST_FLOAT16), py::arg("bf16") = int(OVF_CAST_BFLOAT16),
               py::arg("fp8_e4m3") = int(OVF_CAST_FLOAT8_E4M3),
               py::arg("fp8_e5m2") = int(OVF_CAST_FLOAT8_E5M2));
  // Stepping in the replayed step (`ovf step-into`): ring.h's ovf_step_request and ovf_step_state.
  m.attr("STEP_REQUEST") =
      py::dict(py::arg("none") = int(OVF_STEP_NONE), py::arg("into") = int(OVF_STEP_INTO),
               py::arg("next") = int(OVF_STEP_NEXT), py::arg("step") = int(OVF_STEP_STEP),
               py::arg("finish") = int(OVF_STEP_FINISH));
  m.attr("STEP_STATE") = py::dict(py::arg("at_line") = int(OVF_STEPPING_AT_LINE),
                                  py::arg("returned") = int(OVF_STEPPING_RETURNED));
  m.attr("HEADROOM_DTYPES") =
      py::dict(py::arg("fp16") = int(OVF_DTYPE_FLOAT16), py::arg("bf16") = int(OVF_DTYPE_BFLOAT16),
               py::arg("fp8_e4m3") = int(OVF_DTYPE_FLOAT8_E4M3),
               py::arg("fp8_e5m2") = int(OVF_DTYPE_FLOAT8_E5M2));
}
