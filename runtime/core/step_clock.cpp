#include "step_clock.h"

#include <algorithm>

namespace ovf {

void StepClock::reset() {
  rule_ = StepEnd::kRepeatedForward;
  begin_now();
}

void StepClock::begin_now() {
  ended_ = false;
  gradients_pending_ = false;
  roots_this_step_.clear();
}

StepClock::Begins StepClock::begins_step(uint32_t root_id, bool grad_enabled, uint32_t call_site) {
  const bool seen = std::find(roots_this_step_.begin(), roots_this_step_.end(), root_id) !=
                    roots_this_step_.end();
  Begins begins = Begins::kNo;
  if (ended_) {
    // A training program's evaluation under no_grad after a step is still that step.
    if (grad_enabled || rule_ == StepEnd::kRepeatedForward) begins = Begins::kYes;
  } else if (rule_ == StepEnd::kOptimizerRound && gradients_pending_ && grad_enabled &&
             call_site != OVF_NO_ID && call_site == step_call_site_) {
    begins = Begins::kYes;  // the loop came round again; the last gradients were never applied
  } else if (rule_ == StepEnd::kRepeatedForward && seen) {
    begins = grad_enabled ? Begins::kGuessed : Begins::kYes;
  }
  if (begins != Begins::kNo) begin_now();
  if (roots_this_step_.empty()) step_call_site_ = call_site;  // the step's first forward
  if (begins != Begins::kNo || !seen) roots_this_step_.push_back(root_id);
  return begins;
}

}  // namespace ovf
