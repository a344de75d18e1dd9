#include "buffer_watch.h"

#include "monitor.h"
#include "ring_writer.h"
#include "torch_tensor.h"

namespace ovf {

uint32_t BufferWatch::check(uint32_t module_id, const char* name, const at::Tensor& t,
                            ovf_record* written) {
  if (!t.defined() || !t.is_floating_point()) return 0;
  // Read at every forward: kernels update buffers such as BatchNorm's running
  // statistics without moving their version counter.
  Seen& seen = seen_[name];
  const bool was_nonfinite = seen.impl == t.unsafeGetTensorImpl() && seen.nonfinite;
  seen.impl = t.unsafeGetTensorImpl();
  ovf_record line = tensor_line(OVF_KIND_BUFFER, 0, t, OVF_FLAG_PRODUCER);
  seen.nonfinite = (line.flags & OVF_FLAG_NONFINITE) != 0;
  if (!seen.nonfinite || was_nonfinite) return 0;  // only where it turns non-finite
  const std::string_view module = interned(module_id);
  line.label_id = intern(module.empty() ? std::string(name) : std::string(module) + "." + name);
  line.name_id = line.label_id;
  line.context_id = module_id;
  const uint32_t events = Monitor::instance().commit_line(line);
  *written = line;
  return events;
}

}  // namespace ovf
