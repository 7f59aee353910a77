// What tests with ranks as threads do with each rank's exception: its message, and a check
// that no rank failed (naming each one that did).
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>
#include <vector>

namespace hvd::testing {

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

inline void expectNoErrors(const std::vector<std::exception_ptr>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) {
    EXPECT_FALSE(errors[r]) << "rank " << r << ": " << errorMessage(errors[r]);
  }
}

}  // namespace hvd::testing
