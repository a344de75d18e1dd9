// A module's registered buffers (BatchNorm's running_mean / running_var): a
// forward that turns one non-finite writes a BUFFER record, a producer named by
// the buffer's path. Read again only when the buffer's version counter moved.
#ifndef OVF_BUFFER_WATCH_H
#define OVF_BUFFER_WATCH_H

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <unordered_map>

namespace ovf {

class BufferWatch {
 public:
  // `module_id`: the module's interned path; `name`: the buffer's own name.
  void check(uint32_t module_id, const char* name, const at::Tensor& buffer);
  void clear() { seen_.clear(); }

 private:
  struct Seen {
    const void* impl = nullptr;
    int64_t version = -1;
    bool nonfinite = false;
  };
  std::unordered_map<std::string, Seen> seen_;  // by buffer name
};

}  // namespace ovf

#endif  // OVF_BUFFER_WATCH_H
