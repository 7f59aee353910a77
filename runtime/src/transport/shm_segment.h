// POSIX shared-memory segments holding the rings of a same-host link. The lower rank of a pair
// creates the segment under a random name, the higher rank maps it, and the creator unlinks the
// name as soon as the peer confirms, so a crash leaves nothing behind in /dev/shm after setup.
#pragma once

#include <memory>
#include <string>

#include "transport/shm_link.h"

namespace hvd::transport {

// Creates, sizes and maps a new segment for a ring pair of `capacity` bytes per direction.
// `populate` faults every page in now (else each page costs memory from its first use on).
std::shared_ptr<RingMemory> createShmRing(const std::string& name, size_t capacity,
                                          bool populate = true);
// Maps an existing segment (checks its size against the capacity it claims).
std::shared_ptr<RingMemory> openShmRing(const std::string& name, bool populate = true);
// Removes the name (the mappings stay valid).
void unlinkShm(const std::string& name);

}  // namespace hvd::transport
