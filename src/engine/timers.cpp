#include "engine/timers.h"

#include <cstdio>

#include "core/check.h"

namespace zero::engine {

void Timers::start(const std::string& name) {
  Timer& t = timers_[name];
  ZERO_CHECK(!t.running, "timer " << name << " started twice");
  t.running = true;
  t.started = std::chrono::steady_clock::now();
}

void Timers::stop(const std::string& name) {
  Timer& t = timers_[name];
  ZERO_CHECK(t.running, "timer " << name << " stopped without start");
  t.running = false;
  t.total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t.started).count();
}

double Timers::seconds(const std::string& name) const {
  auto it = timers_.find(name);
  return it == timers_.end() ? 0.0 : it->second.total;
}

void Timers::reset() {
  for (auto& [name, t] : timers_) t.total = 0.0;
}

std::string Timers::summary(std::initializer_list<const char*> names) const {
  std::string out;
  char buffer[64];
  for (const char* name : names) {
    std::snprintf(buffer, sizeof(buffer), "%s: %.2f ms", name, seconds(name) * 1e3);
    out += (out.empty() ? "" : " | ") + std::string(buffer);
  }
  return out;
}

}  // namespace zero::engine
