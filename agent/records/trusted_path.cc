#include "agent/records/trusted_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace hvd::agent::records {
namespace {

std::string octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// What is wrong with the owner and the mode, or "".
std::string ownership(const std::string& path, const struct stat& st, const char* what,
                      const char* fixMode) {
  const uid_t me = ::geteuid();
  if (st.st_uid != me) {
    return what + (" " + path) + " belongs to uid " + std::to_string(st.st_uid) +
           ", not to the agent's uid " + std::to_string(me) +
           ": another user could have put jobs there (chown it to the agent's user, or give "
           "--state-dir a directory of its own)";
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return what + (" " + path) + " has mode " + octal(st.st_mode) +
           ", writable by other users: they could put jobs there (chmod " + fixMode + " " + path +
           ")";
  }
  return "";
}

}  // namespace

std::string untrustedDirectory(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    return "cannot inspect the state directory " + path + ": " + std::strerror(errno);
  }
  if (!S_ISDIR(st.st_mode)) {
    return "the state directory " + path +
           (S_ISLNK(st.st_mode) ? " is a symbolic link (give its target instead)"
                                : " is not a directory");
  }
  return ownership(path, st, "the state directory", "0700");
}

std::string untrustedFile(const std::string& path, uint64_t maxBytes) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0)
    return "cannot inspect " + path + ": " + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return path + " is not a plain file";
  if (static_cast<uint64_t>(st.st_size) > maxBytes) {
    return path + " holds " + std::to_string(st.st_size) + " bytes, more than the " +
           std::to_string(maxBytes) + " such a file may";
  }
  return ownership(path, st, "the state file", "go-w");
}

}  // namespace hvd::agent::records
