// Model's observer slots: the sharding layer's observer plus any number of added ones (the flops
// profiler), combined into one chain so forward()/backward() call a single observer.
#include <vector>

#include "core/check.h"
#include "model/model.h"

namespace zero::model {
namespace {

// Calls its observers' before_* in order and their after_* in reverse, so each one brackets the
// ones after it: the first (the sharding observer) is outermost.
class ObserverChain final : public UnitObserver {
 public:
  explicit ObserverChain(std::vector<UnitObserver*> chain) : chain_(std::move(chain)) {}
  void before_forward(size_t unit) override {
    for (UnitObserver* o : chain_) o->before_forward(unit);
  }
  void after_forward(size_t unit) override {
    for (size_t k = chain_.size(); k-- > 0;) chain_[k]->after_forward(unit);
  }
  void before_backward(size_t unit) override {
    for (UnitObserver* o : chain_) o->before_backward(unit);
  }
  void after_backward(size_t unit) override {
    for (size_t k = chain_.size(); k-- > 0;) chain_[k]->after_backward(unit);
  }

 private:
  std::vector<UnitObserver*> chain_;
};

}  // namespace

void Model::set_observer(UnitObserver* observer) {
  sharding_observer_ = observer;
  rebuild_observer_chain();
}

void Model::add_observer(UnitObserver* observer) {
  ZERO_CHECK(observer != nullptr, "add_observer(nullptr)");
  extra_observers_.push_back(observer);
  rebuild_observer_chain();
}

void Model::remove_observer(UnitObserver* observer) {
  std::erase(extra_observers_, observer);
  rebuild_observer_chain();
}

void Model::rebuild_observer_chain() {
  if (extra_observers_.empty()) {
    observer_chain_.reset();
    observer_ = sharding_observer_;
    return;
  }
  std::vector<UnitObserver*> chain;
  if (sharding_observer_ != nullptr) chain.push_back(sharding_observer_);
  chain.insert(chain.end(), extra_observers_.begin(), extra_observers_.end());
  observer_chain_ = std::make_shared<ObserverChain>(std::move(chain));
  observer_ = observer_chain_.get();
}

}  // namespace zero::model
