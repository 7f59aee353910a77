// The engine with device tensors: ranks as threads, each engine with its own DeviceBackend over
// a fake CUDA ("device" memory is host memory it registered) and a fake NCCL that computes, or
// with NCCL missing (host-staged). Checks fused device allreduces, the host path for scaled
// ops and for allgather, broadcast on the device, and the device as negotiated metadata.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <thread>

#include "common/adasum_reference.h"
#include "common/fake_cuda.h"
#include "common/fake_nccl.h"
#include "engine/engine.h"
#include "gpu/device_backend.h"
#include "hvd/error.hpp"
#include "store/memory_store.h"
#include "transport/local_fabric.h"

namespace hvd {
namespace {

using namespace std::chrono_literals;
using test::FakeCuda;
using test::FakeNcclApi;
using test::FakeNcclWorld;

class DeviceCluster {
 public:
  DeviceCluster(int np, bool nccl) : np_(np) {
    transport::ContextOptions o;
    o.timeout = 20s;
    o.spin = std::chrono::microseconds(20);
    o.yield = std::chrono::microseconds(200);
    contexts_ = transport::makeLocalContexts(np, transport::LocalLinkKind::kShm, o, 64 << 10);
    for (int r = 0; r < np; ++r) {
      gpu::DeviceBackendOptions d;
      d.rank = r;
      d.size = np;
      d.host = "h" + std::to_string(r);
      d.startTimeout = 10s;
      devices_.push_back(std::make_unique<gpu::DeviceBackend>(
          d, *contexts_[r], &store_, [this](std::string*) { return test::sharedFakeCuda(cuda_); },
          [this, nccl](std::string* why) -> std::unique_ptr<gpu::NcclApi> {
            if (!nccl) {
              *why = "libnccl.so.2: cannot open shared object file";
              return nullptr;
            }
            return std::make_unique<FakeNcclApi>(world_);
          }));
      engine::EngineOptions e;
      e.devices = devices_.back().get();
      engines_.push_back(std::make_unique<engine::Engine>(*contexts_[r], e));
    }
  }
  ~DeviceCluster() {
    engines_.clear();
    devices_.clear();
  }

  FakeCuda& cuda() { return cuda_; }
  gpu::DeviceBackend& devices(int r) { return *devices_[r]; }

  void run(const std::function<void(int, engine::Engine&)>& body) {
    std::vector<std::exception_ptr> errors(np_);
    std::vector<std::thread> threads;
    for (int r = 0; r < np_; ++r) {
      threads.emplace_back([&, r] {
        try {
          body(r, *engines_[r]);
        } catch (...) {
          errors[r] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < np_; ++r) {
      if (!errors[r]) continue;
      try {
        std::rethrow_exception(errors[r]);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    }
  }

  float* device(const std::vector<float>& values) {
    auto* p = static_cast<float*>(cuda_.allocOn(0, std::max<size_t>(1, values.size()) * 4));
    std::copy(values.begin(), values.end(), p);
    return p;
  }

 private:
  int np_;
  FakeCuda cuda_;
  FakeNcclWorld world_;
  store::MemoryStore store_;
  std::vector<std::unique_ptr<transport::Context>> contexts_;
  std::vector<std::unique_ptr<gpu::DeviceBackend>> devices_;
  std::vector<std::unique_ptr<engine::Engine>> engines_;
};

// Element i of tensor t on rank r: small integers, exact in float32.
float value(int r, int t, size_t i) { return static_cast<float>(r * 100 + t * 7 + (i % 13)); }

std::vector<float> tensor(int r, int t, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = value(r, t, i);
  return v;
}

class EngineDevice : public ::testing::TestWithParam<bool> {};

TEST_P(EngineDevice, ManyDeviceAllreducesInADifferentOrderOnEachRankAreCorrect) {
  const int np = 3;
  DeviceCluster cluster(np, GetParam());
  constexpr int kTensors = 24;
  cluster.run([&](int r, engine::Engine& engine) {
    std::vector<float*> bufs;
    std::vector<Handle> handles;
    std::vector<int> order(kTensors);
    for (int t = 0; t < kTensors; ++t) order[t] = t;
    std::rotate(order.begin(), order.begin() + r * 5, order.end());  // a different order per rank
    for (int t : order) {
      const size_t n = 1 + static_cast<size_t>(t) * 37;
      float* buf = cluster.device(tensor(r, t, n));
      bufs.push_back(buf);
      OpOptions o;
      o.op = t % 2 == 0 ? ReduceOp::kSum : ReduceOp::kAverage;
      handles.push_back(engine.allreduce("grad/" + std::to_string(t), buf, buf,
                                         {static_cast<int64_t>(n)}, DataType::kFloat32, o));
    }
    for (auto& h : handles) h.wait();
    for (size_t k = 0; k < order.size(); ++k) {
      const int t = order[k];
      const size_t n = 1 + static_cast<size_t>(t) * 37;
      for (size_t i = 0; i < n; ++i) {
        float sum = 0;
        for (int q = 0; q < np; ++q) sum += value(q, t, i);
        const float want = t % 2 == 0 ? sum : sum / np;
        ASSERT_EQ(bufs[k][i], want) << "tensor " << t << " element " << i;
      }
    }
    EXPECT_NE(cluster.devices(r).describe(), "none");
  });
}

TEST_P(EngineDevice, AGroupOfDeviceTensorsRunsAsOneFusedCollective) {
  const int np = 2;
  DeviceCluster cluster(np, GetParam());
  cluster.run([&](int r, engine::Engine& engine) {
    const std::vector<size_t> sizes = {3, 1000, 17};
    std::vector<std::string> names;
    std::vector<const void*> inputs;
    std::vector<void*> outputs;
    std::vector<Shape> shapes;
    for (size_t t = 0; t < sizes.size(); ++t) {
      names.push_back("layer" + std::to_string(t));
      inputs.push_back(cluster.device(tensor(r, static_cast<int>(t), sizes[t])));
      outputs.push_back(cluster.device(std::vector<float>(sizes[t], -1)));
      shapes.push_back({static_cast<int64_t>(sizes[t])});
    }
    OpOptions o;
    o.op = ReduceOp::kSum;
    engine.groupedAllreduce(names, inputs, outputs, shapes, DataType::kFloat32, o).wait();
    for (size_t t = 0; t < sizes.size(); ++t) {
      const float* out = static_cast<const float*>(outputs[t]);
      for (size_t i = 0; i < sizes[t]; ++i) {
        ASSERT_EQ(out[i], value(0, static_cast<int>(t), i) + value(1, static_cast<int>(t), i))
            << "tensor " << t << " element " << i;
      }
    }
    const engine::EngineStats stats = engine.stats();
    EXPECT_EQ(stats.collectives, 1u);
    EXPECT_EQ(stats.fusedTensors, sizes.size());
  });
}

TEST_P(EngineDevice, ScaledDeviceAllreduceTakesTheHostPathAndIsCorrect) {
  const int np = 2;
  DeviceCluster cluster(np, GetParam());
  cluster.run([&](int r, engine::Engine& engine) {
    float* in = cluster.device(tensor(r, 1, 10));
    float* out = cluster.device(std::vector<float>(10, -1));
    OpOptions o;
    o.op = ReduceOp::kSum;
    o.prescaleFactor = 2.0;
    o.postscaleFactor = 0.5;
    o.device = 0;
    engine.allreduce("scaled", in, out, {10}, DataType::kFloat32, o).wait();
    for (size_t i = 0; i < 10; ++i) EXPECT_EQ(out[i], value(0, 1, i) + value(1, 1, i)) << i;
    for (size_t i = 0; i < 10; ++i) EXPECT_EQ(in[i], value(r, 1, i)) << "input changed";
  });
}

TEST_P(EngineDevice, AdasumOfDeviceTensorsIsStagedThroughHostMemoryPerTensor) {
  // NCCL has no Adasum (the fake refuses it as the real one does): the batch takes the host
  // path, every member its own vector. np 3 folds rank 2 into rank 0.
  const int np = 3;
  DeviceCluster cluster(np, GetParam());
  const std::vector<size_t> sizes = {5, 40};
  auto input = [](int r, int t, size_t i) {
    return static_cast<float>(((r + 1) * (t + 2) + static_cast<int>(i) * (r - t)) % 11) - 4.5f;
  };
  cluster.run([&](int r, engine::Engine& engine) {
    std::vector<std::string> names;
    std::vector<const void*> inputs;
    std::vector<void*> outputs;
    std::vector<Shape> shapes;
    for (size_t t = 0; t < sizes.size(); ++t) {
      std::vector<float> v(sizes[t]);
      for (size_t i = 0; i < v.size(); ++i) v[i] = input(r, static_cast<int>(t), i);
      names.push_back("adasum" + std::to_string(t));
      inputs.push_back(cluster.device(v));
      outputs.push_back(cluster.device(std::vector<float>(sizes[t], -1)));
      shapes.push_back({static_cast<int64_t>(sizes[t])});
    }
    OpOptions o;
    o.op = ReduceOp::kAdasum;
    engine.groupedAllreduce(names, inputs, outputs, shapes, DataType::kFloat32, o).wait();
    for (size_t t = 0; t < sizes.size(); ++t) {
      std::vector<std::vector<double>> all(np, std::vector<double>(sizes[t]));
      for (int q = 0; q < np; ++q) {
        for (size_t i = 0; i < sizes[t]; ++i) all[q][i] = input(q, static_cast<int>(t), i);
      }
      const auto want = test::adasumTreeReference(DataType::kFloat32, all);
      const auto* out = static_cast<const float*>(outputs[t]);
      for (size_t i = 0; i < sizes[t]; ++i) {
        ASSERT_NEAR(out[i], want[i], 1e-5) << "tensor " << t << " element " << i;
      }
    }
  });
}

TEST_P(EngineDevice, AllgatherOfDeviceInputsGivesHostOutputAndBroadcastRunsOnTheDevice) {
  const int np = 3;
  DeviceCluster cluster(np, GetParam());
  cluster.run([&](int r, engine::Engine& engine) {
    const int64_t rows = r + 1;
    float* in = cluster.device(tensor(r, 2, static_cast<size_t>(rows * 2)));
    Handle h = engine.allgather("gathered", in, {rows, 2}, DataType::kFloat32);
    h.wait();
    ASSERT_EQ(h.outputShape(), (Shape{6, 2}));
    const float* got = reinterpret_cast<const float*>(h.output().data());
    size_t at = 0;
    for (int q = 0; q < np; ++q) {
      for (size_t i = 0; i < static_cast<size_t>((q + 1) * 2); ++i) {
        EXPECT_EQ(got[at++], value(q, 2, i)) << "rank " << q << " element " << i;
      }
    }
    float* b = cluster.device(tensor(r, 3, 5));
    engine.broadcast("params", b, {5}, DataType::kFloat32, 2).wait();
    for (size_t i = 0; i < 5; ++i) EXPECT_EQ(b[i], value(2, 3, i));
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, EngineDevice, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Nccl") : std::string("HostStaged");
                         });

TEST(EngineDeviceErrors, AGpuTensorOnOneRankAndCpuTensorsOnOthersIsAMismatchOnEveryRank) {
  const int np = 3;
  DeviceCluster cluster(np, true);
  cluster.run([&](int r, engine::Engine& engine) {
    std::vector<float> host = tensor(r, 0, 4);
    float* buf = r == 0 ? cluster.device(host) : host.data();
    Handle h = engine.allreduce("mixed", buf, buf, {4}, DataType::kFloat32, {});
    try {
      h.wait();
      ADD_FAILURE() << "rank " << r << ": no error";
    } catch (const InvalidArgumentError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("allreduce 'mixed'"), std::string::npos) << m;
      EXPECT_NE(m.find("device gpu 0 on rank 0"), std::string::npos) << m;
      EXPECT_NE(m.find("cpu on ranks 1,2"), std::string::npos) << m;
    }
    // The job goes on.
    std::vector<float> ok(3, 1.0f);
    engine.allreduce("after", ok.data(), ok.data(), {3}, DataType::kFloat32, {ReduceOp::kSum})
        .wait();
    EXPECT_EQ(ok[0], 3.0f);
  });
}

TEST(EngineDeviceErrors, ADeviceOptionThatContradictsTheBuffersIsRefusedAtSubmit) {
  DeviceCluster cluster(1, true);
  cluster.run([&](int, engine::Engine& engine) {
    std::vector<float> host(2, 1.0f);
    OpOptions o;
    o.device = 0;
    try {
      engine.allreduce("x", host.data(), host.data(), {2}, DataType::kFloat32, o);
      ADD_FAILURE() << "no error";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("options.device says GPU 0 but the buffers are on "
                                           "the host"),
                std::string::npos)
          << e.what();
    }
    float* d = cluster.device({1, 2});
    try {
      engine.allreduce("y", d, host.data(), {2}, DataType::kFloat32, {});
      ADD_FAILURE() << "no error";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("the input is on GPU 0 and the output on the host"),
                std::string::npos)
          << e.what();
    }
  });
}

}  // namespace
}  // namespace hvd
