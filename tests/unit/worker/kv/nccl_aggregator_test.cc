// MakeLocalAggregator and NcclAggregator. Everywhere: the factory's CPU path and, in a
// build without NCCL, its refusal. Built with NCCL but without a CUDA device (CI): the
// refusals that name the device count. With GPUs: Reduce and Broadcast against sums
// computed on the host; the device parts skip with "no CUDA device" elsewhere.
#include "services/worker/kv/local_aggregator_factory.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

#if DTRAIN_WITH_NCCL
#include <cuda_runtime_api.h>

#include "services/worker/kv/nccl_aggregator.h"
#endif

namespace dtrain::worker {
namespace {

bool Contains(const absl::Status& s, const std::string& part) {
  return std::string(s.message()).find(part) != std::string::npos;
}

TEST(MakeLocalAggregatorTest, NoGpusGiveOneReplicaOnTheCpu) {
  absl::StatusOr<std::unique_ptr<LocalAggregator>> agg = MakeLocalAggregator({});
  ASSERT_TRUE(agg.ok()) << agg.status();
  EXPECT_EQ((*agg)->num_replicas(), 1);
  std::vector<float> w = {1.5f, -2.0f};
  ASSERT_TRUE((*agg)->Reduce({{{w.data()}, 2}}).ok());
  ASSERT_TRUE((*agg)->Broadcast({{{w.data()}, 2}}).ok());
  EXPECT_TRUE((*agg)->Wait(absl::Now()).ok());
  EXPECT_EQ(w, (std::vector<float>{1.5f, -2.0f}));
}

#if !DTRAIN_WITH_NCCL

TEST(MakeLocalAggregatorTest, GpusInABuildWithoutCudaAreRefusedNamingTheBuild) {
  EXPECT_FALSE(BuiltWithNccl());
  absl::StatusOr<std::unique_ptr<LocalAggregator>> agg = MakeLocalAggregator({0, 1});
  ASSERT_EQ(agg.status().code(), absl::StatusCode::kFailedPrecondition) << agg.status();
  EXPECT_TRUE(Contains(agg.status(), "this dtrain was built without CUDA (-DDTRAIN_CUDA=OFF or no CUDA toolkit found)"))
      << agg.status();
}

#else  // DTRAIN_WITH_NCCL

int DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

TEST(NcclAggregatorTest, ThisBuildHasNccl) { EXPECT_TRUE(BuiltWithNccl()); }

TEST(NcclAggregatorTest, ABadGpuListIsRefusedBeforeAnyDeviceIsTouched) {
  EXPECT_EQ(NcclAggregator::Create({}).status().code(), absl::StatusCode::kInvalidArgument);
  absl::Status negative = NcclAggregator::Create({-1}).status();
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(negative, "GPU -1 is not a device ordinal")) << negative;
  absl::Status twice = NcclAggregator::Create({0, 1, 0}).status();
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(twice, "GPU 0 is listed twice")) << twice;
}

// On every machine: the first ordinal past the devices present is refused, naming what
// cudaGetDeviceCount answered (0 and the runtime's error where there is no GPU or driver).
TEST(NcclAggregatorTest, AMissingGpuIsRefusedNamingTheDeviceCount) {
  const int count = DeviceCount();
  absl::Status s = NcclAggregator::Create({count}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(Contains(s, absl::StrCat("cudaGetDeviceCount found ", count, " device"))) << s;
  EXPECT_TRUE(Contains(s, "CUDA_VISIBLE_DEVICES")) << s;
  // The factory gives the worker the same answer.
  absl::StatusOr<std::unique_ptr<LocalAggregator>> made = MakeLocalAggregator({count});
  EXPECT_EQ(made.status(), s);
}

TEST(NcclAggregatorTest, WithoutADeviceGpuZeroIsRefusedNamingTheDeviceCount) {
  if (DeviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  absl::Status s = NcclAggregator::Create({0}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(Contains(s, "no CUDA device for GPUs 0: cudaGetDeviceCount found 0 devices")) << s;
}

// Device memory for one parameter on one GPU, freed at the end of the test.
class DeviceBuffer {
 public:
  DeviceBuffer(int gpu, const std::vector<float>& values) : gpu_(gpu), n_(values.size()) {
    EXPECT_EQ(cudaSetDevice(gpu), cudaSuccess);
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p_), sizeof(float) * n_), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p_, values.data(), sizeof(float) * n_, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBuffer() {
    (void)cudaSetDevice(gpu_);
    (void)cudaFree(p_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  float* get() const { return p_; }
  std::vector<float> Read() const {
    std::vector<float> out(n_);
    EXPECT_EQ(cudaMemcpy(out.data(), p_, sizeof(float) * n_, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }

 private:
  int gpu_;
  size_t n_;
  float* p_ = nullptr;
};

// Up to 4 GPUs of this machine, or a skip when it has fewer than `needed`.
std::vector<int> Gpus(int needed) {
  std::vector<int> gpus;
  for (int g = 0; g < DeviceCount() && g < 4; ++g) gpus.push_back(g);
  return static_cast<int>(gpus.size()) >= needed ? gpus : std::vector<int>{};
}

// Values that are small multiples of 1/4, so that every order of summation gives the
// same float: the host's sum is the one right answer whatever ring NCCL picked.
std::vector<float> Values(int replica, int64_t n, int param) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = 0.25f * static_cast<float>((i * 7 + replica * 13 + param * 5) % 41 - 20);
  return v;
}

TEST(NcclAggregatorTest, ReduceSumsEveryGpuIntoTheFirstAndBroadcastCopiesItBack) {
  const std::vector<int> gpus = Gpus(1);
  if (gpus.empty()) GTEST_SKIP() << "no CUDA device";
  const int n = static_cast<int>(gpus.size());
  absl::StatusOr<std::unique_ptr<NcclAggregator>> agg = NcclAggregator::Create(gpus);
  ASSERT_TRUE(agg.ok()) << agg.status();
  ASSERT_EQ((*agg)->num_replicas(), n);

  // Two parameters, one larger than NCCL's chunks, and an empty one that is skipped.
  const std::vector<int64_t> sizes = {3, (int64_t{1} << 20) + 7, 0};
  std::vector<std::vector<std::unique_ptr<DeviceBuffer>>> buffers(sizes.size());
  std::vector<ReplicaBuffers> params(sizes.size());
  std::vector<std::vector<float>> expected(sizes.size());
  for (size_t p = 0; p < sizes.size(); ++p) {
    expected[p].assign(sizes[p], 0.0f);
    params[p].numel = sizes[p];
    for (int r = 0; r < n; ++r) {
      std::vector<float> v = Values(r, sizes[p], static_cast<int>(p));
      for (int64_t i = 0; i < sizes[p]; ++i) expected[p][i] += v[i];
      buffers[p].push_back(std::make_unique<DeviceBuffer>(gpus[r], v));
      params[p].per_replica.push_back(buffers[p].back()->get());
    }
  }
  ASSERT_TRUE((*agg)->Reduce(params).ok());
  ASSERT_TRUE((*agg)->Wait(absl::Now() + absl::Seconds(60)).ok());
  for (size_t p = 0; p < sizes.size(); ++p) {
    EXPECT_EQ(buffers[p][0]->Read(), expected[p]) << "parameter " << p;
    for (int r = 1; r < n; ++r) {
      EXPECT_EQ(buffers[p][r]->Read(), Values(r, sizes[p], static_cast<int>(p))) << "only replica 0 is written";
    }
  }
  ASSERT_TRUE((*agg)->Broadcast(params).ok());
  ASSERT_TRUE((*agg)->Wait(absl::Now() + absl::Seconds(60)).ok());
  for (size_t p = 0; p < sizes.size(); ++p) {
    for (int r = 1; r < n; ++r) EXPECT_EQ(buffers[p][r]->Read(), expected[p]) << "parameter " << p << " replica " << r;
  }
}

// nccl_aggregator.h's promise: with two replicas the sum is the rank-order sum bit for bit.
TEST(NcclAggregatorTest, TwoGpusSumExactlyAsTheCpuAggregator) {
  const std::vector<int> all = Gpus(2);
  if (all.empty()) GTEST_SKIP() << "no CUDA device (or only one): two are needed";
  const std::vector<int> gpus = {all[0], all[1]};
  std::vector<float> a = {1e8f, 0.1f, 3.3f, -7.7f}, b = {1.0f, 0.2f, 1e-8f, 7.7000003f};
  std::vector<float> cpu_a = a, cpu_b = b;
  ASSERT_TRUE(CpuAggregator(2).Reduce({{{cpu_a.data(), cpu_b.data()}, 4}}).ok());
  DeviceBuffer da(gpus[0], a), db(gpus[1], b);
  absl::StatusOr<std::unique_ptr<NcclAggregator>> agg = NcclAggregator::Create(gpus);
  ASSERT_TRUE(agg.ok()) << agg.status();
  ASSERT_TRUE((*agg)->Reduce({{{da.get(), db.get()}, 4}}).ok());
  ASSERT_TRUE((*agg)->Wait(absl::Now() + absl::Seconds(60)).ok());
  EXPECT_EQ(da.Read(), cpu_a);
}

TEST(NcclAggregatorTest, HostMemoryIsRefusedNamingTheReplica) {
  const std::vector<int> gpus = Gpus(1);
  if (gpus.empty()) GTEST_SKIP() << "no CUDA device";
  absl::StatusOr<std::unique_ptr<NcclAggregator>> agg = NcclAggregator::Create({gpus[0]});
  ASSERT_TRUE(agg.ok()) << agg.status();
  std::vector<float> host = {1.0f};
  absl::Status s = (*agg)->Reduce({{{host.data()}, 1}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(Contains(s, absl::StrCat("is not memory of GPU ", gpus[0]))) << s;
  // Refused before anything was enqueued: the aggregator is still usable.
  EXPECT_TRUE((*agg)->Wait(absl::Now() + absl::Seconds(10)).ok());
  DeviceBuffer d(gpus[0], {2.0f});
  EXPECT_TRUE((*agg)->Broadcast({{{d.get()}, 1}}).ok());
  EXPECT_TRUE((*agg)->Wait(absl::Now() + absl::Seconds(10)).ok());
}

#endif  // DTRAIN_WITH_NCCL

}  // namespace
}  // namespace dtrain::worker
