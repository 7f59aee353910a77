// A Store in a directory, for jobs whose ranks share a filesystem (NFS, Lustre) and have no
// store server. One file per key; the file name is the key percent-encoded, so keys may
// contain '/' and any byte.
//
// Consistency: `set` writes a temporary file and rename(2)s it over the key's file, so a reader
// sees either the old or the new value, never a torn one. Mutations (`set`, `add`,
// `compareSet`, `erase`) hold an flock(2) on the directory's lock file so that a
// read-modify-write cannot interleave with another writer, in this process or any other.
// `get` and `wait` poll: a shared filesystem offers no portable change notification.
#pragma once

#include <string>
#include <vector>

#include "store/store.h"

namespace hvd::store {

class FileStore : public Store {
 public:
  // `directory` must exist and be writable by every rank; it is not created or cleaned here
  // because its lifetime belongs to the job, not to one rank.
  explicit FileStore(std::string directory);

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Timeout timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Timeout timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  void erase(const std::string& key) override;

  // The file name that holds `key` ("k" followed by the percent-encoded key). Exposed so that
  // tests can check that distinct keys never share a file.
  static std::string encodeKey(const std::string& key);

 private:
  std::string pathOf(const std::string& key) const;
  // Reads the key's file; false if it does not exist.
  bool readValue(const std::string& key, Bytes* value) const;
  // Atomically replaces the key's file; the caller holds the lock.
  void writeValue(const std::string& key, const Bytes& value);
  std::vector<std::string> missingKeys(const std::vector<std::string>& keys) const;

  std::string directory_;
};

}  // namespace hvd::store
