#include "model/tied_embedding_copy.h"

namespace zero::model {

TiedEmbeddingCopy::TiedEmbeddingCopy(const ParamSpec& embedding) : Unit("tied_embedding_copy") {
  add_parameter(embedding);
}

}  // namespace zero::model
