// The torch side of the CUDA statistics backend (runtime/cuda): CUDA tensors
// as raw views, the current stream, a pool of FrameStats per device, and the
// first-use self-check's verdict per device. Built into libovf_torch only
// against a CUDA LibTorch with the kernels built (OVF_HAVE_CUDA_GLUE); elsewhere
// make_cuda_group() returns null and every device tensor takes the portable
// backend.
#ifndef OVF_CUDA_BACKEND_H
#define OVF_CUDA_BACKEND_H

#include <memory>
#include <string>

#include "device_batch.h"

namespace ovf {

// Whether this build holds the CUDA backend.
bool cuda_backend_built();

// Says in the header (device_backends) whether this build holds the CUDA backend
// and, if so, whether torch sees a CUDA device: `ovf status` reads it. Called when
// a session starts.
void note_cuda_backend();

// A batch's group for CUDA device `index` (null: not built, or the
// self-check rejected it on that device); with_casts: its statistics count
// what casts to the narrow types would lose too.
std::unique_ptr<DeviceGroupBackend> make_cuda_group(int index, bool with_casts);

// The self-check (device_batch.cpp runs it): whether device `index` has not
// been judged yet, and the verdict on its first frame: `failure` says what
// failed where the CUDA backend did not run ("" where it ran and was compared).
// A rejection warns once and holds for the process.
bool cuda_needs_check(int index);
void cuda_record_check(int index, bool agreed, const std::string& failure = "");

// Whether the current stream of CUDA device `index` is capturing a CUDA graph
// (false where the glue is not built). The test knob OVF_TEST_CAPTURING=1 makes
// device_batch.cpp see every device as capturing.
bool cuda_stream_capturing(int index);

}  // namespace ovf

#endif  // OVF_CUDA_BACKEND_H
