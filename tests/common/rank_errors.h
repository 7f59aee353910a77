// What tests with ranks as threads do with each rank's exception: running every rank's body on
// a thread of its own, its message, and a check that no rank failed (naming each one that did).
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace hvd::test {

// The what() of the exception `e` holds ("?" for one that is not a std::exception).
inline std::string errorMessage(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
  }
  return "?";
}

// Runs body(*contexts[r]) on one thread per rank; returns each rank's exception (or null).
template <typename Context, typename Body>
std::vector<std::exception_ptr> runRanks(std::vector<std::unique_ptr<Context>>& contexts,
                                         Body&& body) {
  std::vector<std::exception_ptr> errors(contexts.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < contexts.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        body(*contexts[r]);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

inline void expectNoErrors(const std::vector<std::exception_ptr>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) {
    EXPECT_FALSE(errors[r]) << "rank " << r << ": " << errorMessage(errors[r]);
  }
}

}  // namespace hvd::test
