// The names of a rank's ops that are in flight, as the user sees it: a name is taken when its op
// is submitted and given back when the user has waited for the op's handle (wait, or a waitFor
// that saw it done) or has dropped every copy of the handle after the op finished — not when
// the engine has run it. The engine may finish an op between two calls of the user's thread;
// if that freed the name, a second submit under the same name would be accepted or refused
// depending on the engine's speed, and an accepted one has no partner on the other ranks, so
// every later op of the job would be misaligned. Tying the name to the handle makes the answer
// the same however fast the engine is (Horovod's rule: one op per name until it is
// synchronized), and it lives here, under the C++ handles, so that every binding gets it.
//
// Thread-safe. Its mutex is a leaf: nothing else is locked while it is held, so it may be
// taken under the engine's mutex or from an OpState's destructor on any thread.
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace hvd::engine {

class InFlightNames {
 public:
  // Takes every one of `names` (all or none). Returns the first that is taken already (by an
  // earlier op, or twice in `names`), or null when all were free and are now taken.
  const std::string* take(const std::vector<const std::string*>& names);
  void giveBack(const std::vector<std::string>& names);

 private:
  std::mutex mutex_;
  std::set<std::string> names_;
};

// The names one handle holds; given back once, by release() or by the destructor.
class NameLease {
 public:
  NameLease(std::shared_ptr<InFlightNames> owner, std::vector<std::string> names)
      : owner_(std::move(owner)), names_(std::move(names)) {}
  ~NameLease() { release(); }
  NameLease(const NameLease&) = delete;
  NameLease& operator=(const NameLease&) = delete;

  void release();

 private:
  std::mutex mutex_;
  std::shared_ptr<InFlightNames> owner_;  // null once released
  std::vector<std::string> names_;
};

}  // namespace hvd::engine
