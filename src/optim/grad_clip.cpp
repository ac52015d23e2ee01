#include "optim/grad_clip.h"

namespace zero::optim {

double clip_coefficient(double total_norm, double max_norm) {
  return max_norm / (total_norm + 1e-6);
}

}  // namespace zero::optim
