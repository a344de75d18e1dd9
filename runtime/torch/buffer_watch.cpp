#include "buffer_watch.h"

#include "monitor.h"
#include "ring_writer.h"
#include "torch_tensor.h"

namespace ovf {

void BufferWatch::check(uint32_t module_id, const char* name, const at::Tensor& t) {
  if (!t.defined() || t.is_inference() || !t.is_floating_point()) return;
  const int64_t version = static_cast<int64_t>(t._version());
  Seen& seen = seen_[name];
  if (seen.impl == t.unsafeGetTensorImpl() && seen.version == version) return;
  const bool was_nonfinite = seen.impl == t.unsafeGetTensorImpl() && seen.nonfinite;
  seen.impl = t.unsafeGetTensorImpl();
  seen.version = version;
  ovf_record line = tensor_line(OVF_KIND_BUFFER, 0, t, OVF_FLAG_PRODUCER);
  seen.nonfinite = (line.flags & OVF_FLAG_NONFINITE) != 0;
  if (!seen.nonfinite || was_nonfinite) return;  // only where it turns non-finite
  const std::string_view module = interned(module_id);
  line.label_id = intern(module.empty() ? std::string(name) : std::string(module) + "." + name);
  line.name_id = line.label_id;
  line.context_id = module_id;
  Monitor::instance().commit_line(line);
}

}  // namespace ovf
