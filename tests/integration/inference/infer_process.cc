#include "tests/integration/inference/infer_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/grpc_util.h"
#include "gtest/gtest.h"
#include "common/data/idx_reader.h"

namespace dtrain::testing {
namespace {

namespace fs = std::filesystem;

// Holds an flock with a deadline, so a stuck sibling test cannot hang this one.
class FileLock {
 public:
  FileLock(const std::string& path, absl::Duration timeout) {
    fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    const absl::Time give_up = absl::Now() + timeout;
    while (fd_ >= 0 && ::flock(fd_, LOCK_EX | LOCK_NB) != 0 && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(100));
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }

 private:
  int fd_ = -1;
};

std::vector<double> ValidationPerEpoch(const std::string& log) {
  std::vector<double> out;
  for (const std::string& v : ValuesAfter(log, "Validation-accuracy", "] Validation-accuracy")) {
    double d = -1;
    EXPECT_TRUE(absl::SimpleAtod(v, &d)) << v;
    out.push_back(d);
  }
  return out;
}

TrainedCheckpoint* TrainOnce() {
  const std::string dir = DTRAIN_INFER_FIXTURE_DIR;
  fs::create_directories(dir);
  FileLock lock(dir + "/.lock", absl::Minutes(3));
  auto* t = new TrainedCheckpoint;
  t->prefix = dir + "/m";
  const std::string done = dir + "/done", log_path = dir + "/train.log";
  std::error_code ec;
  const bool fresh = fs::exists(done) && fs::last_write_time(done, ec) >= fs::last_write_time(Bin("dtrain-worker"), ec);
  if (!fresh) {
    fs::remove(done, ec);
    auto [code, out] = RunToEnd(
        {Bin("dtrain-worker"), "--kv-store", "local", "--network", "lenet", "--num-epochs", "2", "--num-examples",
         "2000", "--model-prefix", t->prefix, "--data-dir", kDataDir, "--overwrite-checkpoints"},
        absl::Minutes(3));
    std::ofstream(log_path) << out;
    if (code != 0) {
      ADD_FAILURE() << "training the test checkpoint failed:\n" << out;
      return t;
    }
    std::ofstream(done) << "ok\n";
  }
  t->validation = ValidationPerEpoch(ReadWholeFile(log_path));
  EXPECT_EQ(t->validation.size(), 2u) << ReadWholeFile(log_path);
  return t;
}

// Removes the scratch directories when the test program ends.
class ScratchDirs {
 public:
  ~ScratchDirs() {
    absl::MutexLock lock(&mu_);
    std::error_code ec;
    for (const std::string& d : dirs_) fs::remove_all(d, ec);
  }
  std::string Make() {
    std::string dir = MakeTempDir();
    absl::MutexLock lock(&mu_);
    dirs_.push_back(dir);
    return dir;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> dirs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::string ScratchDir() {
  static ScratchDirs* dirs = new ScratchDirs;
  static const bool cleanup = [] { return std::atexit([] { delete dirs; }) == 0; }();
  (void)cleanup;
  return dirs->Make();
}

const TrainedCheckpoint& Trained() {
  static const TrainedCheckpoint* t = TrainOnce();
  return *t;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void InstallBytes(const std::string& bytes, const std::string& to) {
  const std::string tmp = to + ".tmp.test";
  std::ofstream(tmp, std::ios::binary | std::ios::trunc) << bytes;
  fs::rename(tmp, to);
}

void InstallFile(const std::string& from, const std::string& to) { InstallBytes(ReadWholeFile(from), to); }

InferProcess::InferProcess(std::vector<std::string> flags) {
  const std::string port_file = ScratchDir() + "/port";
  std::vector<std::string> argv = {Bin("dtrain-infer"), "--port-file", port_file};
  argv.insert(argv.end(), flags.begin(), flags.end());
  process_ = std::make_unique<Subprocess>(argv);
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (absl::Now() < give_up && process_->running()) {
    std::ifstream in(port_file);
    if (in >> port_ && port_ > 0) break;
    port_ = 0;
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (port_ == 0) {
    ADD_FAILURE() << "dtrain-infer did not write " << port_file << ":\n" << process_->output();
    return;
  }
  auto channel = MakeChannel(address());
  inference_ = v1::Inference::NewStub(channel);
  health_ = grpc::health::v1::Health::NewStub(channel);
}

InferProcess::~InferProcess() = default;

std::shared_ptr<grpc::Channel> InferProcess::Connect(absl::Duration timeout) {
  auto channel = MakeChannel(address());
  EXPECT_TRUE(channel->WaitForConnected(DeadlineAfter(timeout)))
      << "no connection to dtrain-infer at " << address() << " within " << timeout << "\n"
      << process_->output();
  return channel;
}

int InferProcess::Health(const std::string& service) {
  if (health_ == nullptr) return -1;
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(absl::Seconds(5)));
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  if (!health_->Check(&ctx, req, &resp).ok()) return -1;
  return resp.status();
}

bool InferProcess::WaitForHealth(int status, absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (absl::Now() < give_up) {
    if (Health() == status) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

int InferProcess::Stop(absl::Duration timeout) {
  process_->Signal(SIGTERM);
  return process_->Wait(timeout);
}

v1::PredictRequest T10kRequest(int count, int top_k) {
  static const data::IdxArray* images = [] {
    auto read = data::ReadIdx(std::string(kDataDir) + "/t10k-images-idx3-ubyte.gz");
    EXPECT_TRUE(read.ok()) << read.status();
    return new data::IdxArray(read.ok() ? *std::move(read) : data::IdxArray{});
  }();
  v1::PredictRequest req;
  req.set_pixel_type(v1::PIXEL_TYPE_UINT8);
  req.add_shape(count);
  req.add_shape(28);
  req.add_shape(28);
  req.set_data(images->data.data(), std::min<size_t>(images->data.size(), static_cast<size_t>(count) * 784));
  req.set_top_k(top_k);
  return req;
}

}  // namespace dtrain::testing
