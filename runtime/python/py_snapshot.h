// The Python driver's event snapshot (core/snapshot.h): the Python stack of the
// thread that made the value and the locals of its innermost frame of the
// program's own code, with each tensor's statistics. Read with the C API's
// frame accessors only: no code of the program runs (no __repr__, no property).
#ifndef OVF_PY_SNAPSHOT_H
#define OVF_PY_SNAPSHOT_H

#include <cstdint>
#include <string>

typedef struct _object PyObject;  // Python.h's own declaration

namespace ovf {

// Registers the writer with the core (once the interpreter runs ovf).
void install_python_snapshot();

// Takes the snapshot of the event `event_seq` (core/snapshot.h) from `frame` (a
// PyFrameObject*) outwards, its locals shown whoever's code it runs: a debugger's
// step stop in the replayed step (the stepping's own frames above it are left out).
void snapshot_frame(PyObject* frame, uint64_t event_seq);

// Where torch.compile writes the code it generates (Inductor's cache directory): its
// frames are not the program's own (a location names the line of the program instead).
void set_generated_code_dir(const std::string& dir);

// The program's own innermost frame on this thread, "file.py:LINE in function",
// interned (OVF_NO_ID where none): where an op ran, or where a model was called.
uint32_t python_location();

}  // namespace ovf

#endif  // OVF_PY_SNAPSHOT_H
