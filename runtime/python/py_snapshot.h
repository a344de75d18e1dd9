// The Python driver's event snapshot (core/snapshot.h): the Python stack of the
// thread that made the value and the locals of its innermost frame of the
// program's own code, with each tensor's statistics. Read with the C API's
// frame accessors only: no code of the program runs (no __repr__, no property).
#ifndef OVF_PY_SNAPSHOT_H
#define OVF_PY_SNAPSHOT_H

namespace ovf {

// Registers the writer with the core (once the interpreter runs ovf).
void install_python_snapshot();

}  // namespace ovf

#endif  // OVF_PY_SNAPSHOT_H
