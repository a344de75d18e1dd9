// The user's training step: what a batch number counts in auto mode
// (`python3 -m ovf`, a debugger's `ovf break-on-nan`). The reference counts the
// root module's forwards; real programs call their model twice a step (a
// siamese pair), call several models (a GAN's generator and discriminator),
// and call modules that train nothing (a DataLoader's Normalize transform, a
// loss module, evaluation under no_grad). Here a step begins at the first
// forward of a trained model (a "step root": a root module with parameters,
// outside DataLoader workers) after the previous step ended (in a program that
// trains, a forward with gradients on: an evaluation under no_grad after a step
// belongs to that step); it ends
//   - at the optimizer step that completes the round of the program's
//     optimizers (both of a GAN's), once the program has optimizers; or, where
//     a backward() made gradients that no optimizer step applied, when the
//     line that began the step calls its model again with gradients on (a loss
//     scaler of the program's own that skips the update on inf; gradient
//     accumulation, whose loop counts each forward/backward; not a GAN's
//     discriminator called again from another line between its backward and
//     its optimizer's step);
//   - at each backward() of a program without one (a hand-written update
//     through .data);
//   - before backward() was ever called (inference, a forward-only loop): a
//     step root called a second time begins the next step. With gradients on,
//     that is a guess (a siamese pair's second forward in the first step looks
//     the same): the first backward() undoes the steps guessed so, since the
//     forwards it differentiates were one step.
// The drivers say which (Python's backward wrapper and optimizer hook). Not
// thread-safe by itself: Monitor calls it under its lock.
#ifndef OVF_STEP_CLOCK_H
#define OVF_STEP_CLOCK_H

#include <cstdint>
#include <vector>

#include "ovf/ring.h"

namespace ovf {

enum class StepEnd : uint32_t {
  kRepeatedForward = 0,  // no backward seen yet
  kBackward = 1,         // backward() and no optimizer
  kOptimizerRound = 2,   // the last optimizer of a round stepped
};

class StepClock {
 public:
  void reset();
  void set_step_end(StepEnd rule) { rule_ = rule; }
  StepEnd step_end() const { return rule_; }
  enum class Begins { kNo, kYes, kGuessed };
  // A step root's forward, called from `call_site` (the program's line, interned;
  // OVF_NO_ID where unknown), begins: whether it begins a new step, and whether that is
  // a guess (a repeated forward with gradients on, before any backward).
  Begins begins_step(uint32_t root_id, bool grad_enabled, uint32_t call_site);
  // The event the rule names happened: the next step root's forward begins a step.
  void end_step() { ended_ = true; }
  // kOptimizerRound: a backward() made gradients (true), an optimizer stepped
  // (false). While they are pending, the step's first line calling its model
  // again with gradients on begins the next step: the program skipped or
  // deferred the update.
  void set_gradients_pending(bool pending) { gradients_pending_ = pending; }
  // A step begins now, without a forward (an optimizer that stepped twice in
  // one round: the round was shorter than thought).
  void begin_now();

 private:
  StepEnd rule_ = StepEnd::kRepeatedForward;
  bool ended_ = false;
  bool gradients_pending_ = false;
  uint32_t step_call_site_ = OVF_NO_ID;    // the line whose forward began this step
  std::vector<uint32_t> roots_this_step_;  // kRepeatedForward: the step roots called so far
};

}  // namespace ovf

#endif  // OVF_STEP_CLOCK_H
