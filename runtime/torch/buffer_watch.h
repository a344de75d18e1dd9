// A module's registered buffers (BatchNorm's running_mean / running_var): a
// forward that turns one non-finite writes a BUFFER record, a producer named by
// the buffer's path.
#ifndef OVF_BUFFER_WATCH_H
#define OVF_BUFFER_WATCH_H

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <unordered_map>

#include "ovf/ring.h"

namespace ovf {

class BufferWatch {
 public:
  // `module_id`: the module's interned path; `name`: the buffer's own name.
  // Returns the stop events of the record it wrote (0: none written) and the
  // record in `*written`.
  uint32_t check(uint32_t module_id, const char* name, const at::Tensor& buffer,
                 ovf_record* written);
  void clear() { seen_.clear(); }

 private:
  struct Seen {
    const void* impl = nullptr;
    bool nonfinite = false;
  };
  std::unordered_map<std::string, Seen> seen_;  // by buffer name
};

}  // namespace ovf

#endif  // OVF_BUFFER_WATCH_H
