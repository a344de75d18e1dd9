// Early warning from a module's own history: its output's abs max, followed
// batch by batch, grows fast enough to pass the dtype's largest value soon.
//
// A module's value for a batch is the largest abs max of its outputs over its
// calls in that batch. A forecast needs three consecutive batches whose values
// each grew by at least kMinGrowth over the one before: healthy training moves
// activations by percents per batch, not by factors, and one jump (a zero-
// initialised layer's first update) is not a trend. At the latest growth, the
// batches left until the value passes the limit are counted; within the horizon
// that is a forecast. Judged while the batch runs (its value so far), so the
// warning comes at the first call that makes the forecast. Not thread-safe:
// the monitor judges frames under one lock.
#ifndef OVF_GROWTH_WATCH_H
#define OVF_GROWTH_WATCH_H

#include <cstdint>
#include <unordered_map>

namespace ovf {

class GrowthWatch {
 public:
  static constexpr double kMinGrowth = 2.0;  // per batch, in each of the last two batches

  struct Forecast {
    double previous = 0;        // the value of the batch before
    double now = 0;             // this batch's value so far
    double growth = 0;          // now / previous
    uint32_t batches_left = 0;  // until the value passes the limit at this growth (>= 1)
  };

  // One output's abs max (finite, >= 0) of `module` in `batch`, whose dtype's
  // largest value is `limit`. True with a forecast when the value will pass it
  // within `horizon` batches.
  bool observe(uint32_t module, uint64_t batch, double abs_max, double limit, uint32_t horizon,
               Forecast* out);
  void clear() { modules_.clear(); }

 private:
  struct History {
    uint64_t batch = 0;  // the batch `now` is of
    double now = 0;
    double before[2] = {0, 0};  // the values of batch - 1 and batch - 2 (0: none)
  };
  std::unordered_map<uint32_t, History> modules_;
};

}  // namespace ovf

#endif  // OVF_GROWTH_WATCH_H
