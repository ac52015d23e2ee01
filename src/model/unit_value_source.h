// UnitValueSource: where a model's initial parameter values come from when the model was built
// without its flat buffers (Model::finalize_partitioned, DeepSpeed's zero.Init for ZeRO-3): the
// sharding layer asks for each unit's values, unit by unit, and keeps only this rank's shard.
// So no process ever holds more than one unit of the model at a time (a random initialisation
// draws a whole unit; a Hugging Face folder is read only where this rank's elements are).
//
// Sources: model/partitioned_init.h (the same values init_parameters() draws) and
// model/hf_unit_values.h (a Hugging Face model folder).
//
// Units: elements. Thread rules: one thread; units are asked for in non-decreasing order.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/tensor.h"

namespace zero::model {

class Model;

class UnitValueSource {
 public:
  virtual ~UnitValueSource() = default;
  // Writes elements [begin, begin + count) of unit `unit`'s values, counted from the unit's
  // first element (Unit::flat_begin(); gaps between parameters are zero), into `out`: a host
  // tensor of `count` elements in the model's parameter dtype. Throws FileError/ShapeError for
  // bad weights (naming the file and tensor).
  virtual void unit_values(const Model& model, size_t unit, int64_t begin, int64_t count,
                           Tensor& out) = 0;
};

}  // namespace zero::model
