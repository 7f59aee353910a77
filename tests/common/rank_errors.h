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

// Runs body(r) for r in 0..n-1 on one thread each; returns each rank's exception (or null).
// The one ranks-as-threads runner of the tests.
template <typename Body>
std::vector<std::exception_ptr> runRankIndices(int n, Body&& body) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// Runs body(*contexts[r]) on one thread per rank; returns each rank's exception (or null).
template <typename Context, typename Body>
std::vector<std::exception_ptr> runRanks(std::vector<std::unique_ptr<Context>>& contexts,
                                         Body&& body) {
  return runRankIndices(static_cast<int>(contexts.size()), [&](int r) { body(*contexts[r]); });
}

inline void expectNoErrors(const std::vector<std::exception_ptr>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) {
    EXPECT_FALSE(errors[r]) << "rank " << r << ": " << errorMessage(errors[r]);
  }
}

}  // namespace hvd::test
