// HVD_CPU_BACKEND=mpi with different arguments on different ranks: MPI itself would have
// undefined behaviour, so MpiCollectives allgathers the call descriptors first and every rank
// fails with the same InvalidArgumentError before MPI sees the data call. Ranks are threads
// over a fake MPI world whose allgatherv and allreduce really exchange between the threads.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hvd/error.hpp"
#include "mpi/mpi_collectives.h"

namespace hvd::mpi {
namespace {

constexpr int kRanks = 2;

// Every call is a deposit of each rank's bytes, then a read of everyone's: two phases, each
// ending when every rank has arrived.
struct World {
  std::mutex mutex;
  std::condition_variable cv;
  int arrived = 0;
  uint64_t generation = 0;
  std::vector<std::vector<uint8_t>> blocks = std::vector<std::vector<uint8_t>>(kRanks);
  int dataCalls = 0;  // allreduce and bcast calls: what MPI would run with the user's buffers

  void wait(std::unique_lock<std::mutex>& lock) {
    const uint64_t mine = generation;
    if (++arrived == kRanks) {
      arrived = 0;
      ++generation;
      cv.notify_all();
    } else {
      cv.wait(lock, [&] { return generation != mine; });
    }
  }
  std::vector<std::vector<uint8_t>> exchange(int rank, const void* data, size_t bytes) {
    std::unique_lock<std::mutex> lock(mutex);
    const auto* p = static_cast<const uint8_t*>(data);
    blocks[rank].assign(p, p + bytes);
    wait(lock);
    auto all = blocks;
    wait(lock);
    return all;
  }
};

struct RankComm {
  World* world;
  int rank;
};

RankComm& of(hvd_mpi_comm* comm) { return *reinterpret_cast<RankComm*>(comm); }

hvd_mpi_plugin_v1 worldTable() {
  hvd_mpi_plugin_v1 t{};
  t.abi_version = HVD_MPI_PLUGIN_ABI_VERSION;
  t.struct_size = sizeof(t);
  t.allgatherv = [](hvd_mpi_comm* comm, const void* send, void* recv, const uint64_t* counts,
                    int dtype, char*, size_t) {
    RankComm& c = of(comm);
    const size_t elem = dataTypeSize(static_cast<DataType>(dtype));
    std::vector<size_t> offset(kRanks + 1, 0);
    for (int p = 0; p < kRanks; ++p) offset[p + 1] = offset[p] + counts[p] * elem;
    auto* out = static_cast<uint8_t*>(recv);
    const void* mine = send == nullptr ? out + offset[c.rank] : send;
    const auto all = c.world->exchange(c.rank, mine, counts[c.rank] * elem);
    for (int p = 0; p < kRanks; ++p) std::memcpy(out + offset[p], all[p].data(), all[p].size());
    return HVD_MPI_OK;
  };
  t.allreduce = [](hvd_mpi_comm* comm, const void* send, void* recv, uint64_t count, int dtype,
                   int op, char*, size_t) {
    // int32 sums only: what the tests' matching calls use.
    RankComm& c = of(comm);
    ++c.world->dataCalls;
    const auto all = c.world->exchange(c.rank, send == nullptr ? recv : send, count * 4);
    auto* out = static_cast<int32_t*>(recv);
    for (uint64_t i = 0; i < count; ++i) {
      int32_t sum = 0;
      for (int p = 0; p < kRanks; ++p) sum += reinterpret_cast<const int32_t*>(all[p].data())[i];
      out[i] = sum;
    }
    return HVD_MPI_OK;
  };
  t.bcast = [](hvd_mpi_comm* comm, void*, uint64_t, int, char*, size_t) {
    ++of(comm).world->dataCalls;
    return HVD_MPI_OK;
  };
  return t;
}

class MpiMismatch : public ::testing::Test {
 protected:
  // Runs body(rank's collectives) on one thread per rank; returns each rank's error message
  // ("" when it succeeded, "not an InvalidArgumentError: ..." for another kind).
  std::vector<std::string> run(const std::function<void(MpiCollectives&, int)>& body) {
    std::vector<std::string> messages(kRanks);
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] {
        try {
          body(*collectives_[r], r);
        } catch (const InvalidArgumentError& e) {
          messages[r] = e.what();
        } catch (const std::exception& e) {
          messages[r] = std::string("not an InvalidArgumentError: ") + e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    return messages;
  }

  void SetUp() override {
    for (int r = 0; r < kRanks; ++r) {
      comms_[r] = RankComm{&world_, r};
      collectives_.push_back(std::make_unique<MpiCollectives>(
          table_, reinterpret_cast<hvd_mpi_comm*>(&comms_[r]), r, kRanks, "mpi (fake world)",
          std::chrono::milliseconds(0)));
    }
  }

  void expectEveryRank(const std::vector<std::string>& messages, const std::string& want) {
    for (int r = 0; r < kRanks; ++r) EXPECT_EQ(messages[r], want) << "rank " << r;
  }

  // A matching allreduce after the failed call is exact.
  void expectNextAllreduceExact() {
    const auto messages = run([](MpiCollectives& c, int r) {
      std::vector<int32_t> data = {r + 1, 10 * (r + 1), -r};
      c.allreduce(data.data(), data.data(), data.size(), DataType::kInt32, {});
      ASSERT_EQ(data, (std::vector<int32_t>{3, 30, -1}));
    });
    expectEveryRank(messages, "");
  }

  World world_;
  hvd_mpi_plugin_v1 table_ = worldTable();
  RankComm comms_[kRanks];
  std::vector<std::unique_ptr<MpiCollectives>> collectives_;
};

TEST_F(MpiMismatch, CountDiffersFailsEveryRankBeforeMpiSeesTheData) {
  const auto messages = run([](MpiCollectives& c, int r) {
    std::vector<float> data(18, 1.0f);
    c.allreduce(data.data(), data.data(), r == 0 ? 17 : 18, DataType::kFloat32, {});
  });
  expectEveryRank(messages, "allreduce: count differs across ranks: 17 on rank 0, 18 on rank 1");
  EXPECT_EQ(world_.dataCalls, 0);
  expectNextAllreduceExact();
}

TEST_F(MpiMismatch, TypeOpRootAndCollectiveDiffer) {
  std::vector<float> data(8, 1.0f);
  expectEveryRank(run([&](MpiCollectives& c, int r) {
                    std::vector<int32_t> buffer(8);
                    c.allreduce(buffer.data(), buffer.data(), 8,
                                r == 0 ? DataType::kInt32 : DataType::kFloat32, {});
                  }),
                  "allreduce: type differs across ranks: int32 on rank 0, float32 on rank 1");
  expectEveryRank(run([&](MpiCollectives& c, int r) {
                    std::vector<int32_t> buffer(8);
                    c.allreduce(buffer.data(), buffer.data(), 8, DataType::kInt32,
                                {r == 0 ? ReduceOp::kSum : ReduceOp::kMin});
                  }),
                  "allreduce: op differs across ranks: sum on rank 0, min on rank 1");
  expectEveryRank(run([&](MpiCollectives& c, int r) {
                    std::vector<int32_t> buffer(8);
                    c.broadcast(buffer.data(), 8, DataType::kInt32, {/*root=*/r});
                  }),
                  "broadcast: root differs across ranks: 0 on rank 0, 1 on rank 1");
  const auto kinds = run([&](MpiCollectives& c, int r) {
    std::vector<int32_t> buffer(8);
    if (r == 0) {
      c.allreduce(buffer.data(), buffer.data(), 8, DataType::kInt32, {});
    } else {
      c.broadcast(buffer.data(), 8, DataType::kInt32, {});
    }
  });
  EXPECT_EQ(kinds[0],
            "allreduce: collective differs across ranks: allreduce on rank 0, broadcast on rank 1");
  EXPECT_EQ(kinds[1],
            "broadcast: collective differs across ranks: allreduce on rank 0, broadcast on rank 1");
  EXPECT_EQ(world_.dataCalls, 0);
  expectNextAllreduceExact();
}

TEST_F(MpiMismatch, AllgatherCountsThatDisagreeWithTheContributions) {
  const auto messages = run([](MpiCollectives& c, int r) {
    std::vector<int32_t> in(r + 1, r), out(4);
    const std::vector<size_t> counts =
        r == 0 ? std::vector<size_t>{1, 2} : std::vector<size_t>{2, 2};
    c.allgather(in.data(), in.size(), out.data(), counts, DataType::kInt32, Algorithm::kAuto);
  });
  expectEveryRank(messages,
                  "allgather: counts differ from the counts the ranks contribute (1 on rank 0, 2 "
                  "on rank 1) on rank 1");
  expectNextAllreduceExact();
}

}  // namespace
}  // namespace hvd::mpi
