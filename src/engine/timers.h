// Wall-clock timers for the phases of a step (forward, backward, step), as DeepSpeed's
// wall_clock_breakdown prints them. Host time; a device backend synchronises before stop().
#pragma once
#include <chrono>
#include <map>
#include <string>

namespace zero::engine {

class Timers {
 public:
  void start(const std::string& name);
  void stop(const std::string& name);
  // Seconds accumulated since the last reset().
  double seconds(const std::string& name) const;
  void reset();
  // "forward: 12.34 ms | backward: ... " for the names given, in that order.
  std::string summary(std::initializer_list<const char*> names) const;

 private:
  struct Timer {
    std::chrono::steady_clock::time_point started;
    double total = 0.0;
    bool running = false;
  };
  std::map<std::string, Timer> timers_;
};

}  // namespace zero::engine
