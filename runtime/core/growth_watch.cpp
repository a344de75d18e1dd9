#include "growth_watch.h"

#include <cmath>

namespace ovf {

bool GrowthWatch::observe(uint32_t module, uint64_t batch, double abs_max, double limit,
                          uint32_t horizon, Forecast* out) {
  auto [it, fresh] = modules_.try_emplace(module);
  History& h = it->second;
  if (fresh) {
    h.batch = batch;
  } else if (batch != h.batch) {
    // A batch it did not run in breaks the sequence: only consecutive batches count.
    const bool next = batch == h.batch + 1;
    h.before[1] = next ? h.before[0] : 0;
    h.before[0] = next ? h.now : 0;
    h.batch = batch;
    h.now = 0;
  }
  if (abs_max > h.now) h.now = abs_max;
  const double older = h.before[1], previous = h.before[0], now = h.now;
  if (horizon == 0 || !(older > 0) || !(limit > now) || previous < kMinGrowth * older ||
      now < kMinGrowth * previous) {
    return false;
  }
  const double growth = now / previous;
  const double left = std::ceil(std::log(limit / now) / std::log(growth));
  if (!(left <= horizon)) return false;
  out->previous = previous;
  out->now = now;
  out->growth = growth;
  out->batches_left = left < 1 ? 1u : static_cast<uint32_t>(left);
  return true;
}

}  // namespace ovf
