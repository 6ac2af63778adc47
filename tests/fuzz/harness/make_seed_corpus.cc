// Writes the seed corpus under DIR/<target>/ from the real writers, so the seeds are
// files dtrain itself produces: make_seed_corpus DIR. Each seed is one option byte
// (see each *_fuzzer.cc) followed by the file. Rerun it when a format changes and
// commit the result (tests/fuzz/corpus); see docs/fuzzing.md.
#include <cairo.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/checkpoint/checkpoint.h"
#include "common/file_io.h"
#include "common/kv/tensor_codec.h"
#include "dtrain/v1/parameter_server.pb.h"
#include "services/predict/png_io.h"

namespace dtrain::fuzz {
namespace {

std::string g_root;

void Seed(const std::string& target, const std::string& name, uint8_t options, const std::string& file) {
  const std::string dir = g_root + "/" + target;
  std::filesystem::create_directories(dir);
  std::string bytes(1, static_cast<char>(options));
  bytes += file;
  if (!WriteFileAtomically(dir + "/" + name, bytes).ok()) {
    std::fprintf(stderr, "cannot write %s/%s\n", dir.c_str(), name.c_str());
    std::exit(1);
  }
}

std::string Slurp(const std::string& path) {
  absl::StatusOr<std::string> s = ReadFileLimited(path, 1 << 20);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.status().message()).c_str());
    std::exit(1);
  }
  return *s;
}

std::string Flatten(const grpc::ByteBuffer& b) {
  std::vector<grpc::Slice> slices;
  if (!b.Dump(&slices).ok()) std::exit(1);
  std::string out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

void Framing() {
  const std::vector<float> grad = {0.5f, -1.25f, 3.0f, 1e-3f};
  v1::PushPullRequest push;
  push.set_request_id(2);
  push.set_op(v1::OP_PUSH_PULL);
  push.set_worker_rank(1);
  push.set_step(7);
  push.set_key((uint64_t{3} << 24) | 1);
  push.set_dtype(v1::DTYPE_FLOAT32);
  push.set_min_version(8);
  push.set_timeout_ms(30000);
  const std::string push_bytes =
      Flatten(kv::EncodeWithPayload(push, v1::PushPullRequest::kDataFieldNumber, kv::CopyToSlice(grad.data(), 4)));
  Seed("pushpull_framing", "push_pull", 0, push_bytes);
  Seed("pushpull_framing", "push_pull_two_slices", 1 | (40 << 2), push_bytes);
  Seed("pushpull_framing", "push_pull_byte_slices", 3, push_bytes);
  v1::PushPullRequest pull;
  pull.set_request_id(4);
  pull.set_op(v1::OP_PULL);
  pull.set_key(5);
  pull.set_min_version(3);
  Seed("pushpull_framing", "pull", 2 | (20 << 2), pull.SerializeAsString());

  v1::PushPullResponse ok;
  ok.set_request_id(2);
  ok.set_key(5);
  ok.set_version(8);
  const std::string ok_bytes =
      Flatten(kv::EncodeWithPayload(ok, v1::PushPullResponse::kDataFieldNumber, kv::CopyToSlice(grad.data(), 4)));
  Seed("pushpull_framing", "response", 0, ok_bytes);
  Seed("pushpull_framing", "response_three_slices", 2 | (10 << 2), ok_bytes);
  v1::PushPullResponse err;
  err.set_request_id(3);
  err.set_code(4);
  err.set_message("step 812 key 3: waiting for worker 2, last heard 31 s ago");
  Seed("pushpull_framing", "error_response", 0, err.SerializeAsString());
  // Protobuf's own encoding with a field after the payload (any peer may send this).
  v1::PushPullRequest tail = push;
  tail.set_data(std::string(reinterpret_cast<const char*>(grad.data()), 8));
  Seed("pushpull_framing", "field_after_payload", 1 | (32 << 2), tail.SerializeAsString());
  // Compressed pushes: 2bit (one word: 16 values), 1bit (scale + one word),
  // fp16 (the four values as halves), packed as DistKVStore packs them.
  v1::PushPullRequest two_bit = push;
  two_bit.set_compression(v1::COMPRESSION_2BIT);
  two_bit.set_gc_threshold(0.5f);
  const char two_bit_word[4] = {static_cast<char>(0xe0), 0x0c, 0x00, 0x00};  // +, -, 0, 0, 0, 0, +
  Seed("pushpull_framing", "push_2bit", 0,
       Flatten(kv::EncodeWithPayload(two_bit, v1::PushPullRequest::kDataFieldNumber, grpc::Slice(two_bit_word, 4))));
  v1::PushPullRequest one_bit = push;
  one_bit.set_compression(v1::COMPRESSION_1BIT);
  const float scale = 1.1875f;
  std::string one_bit_bytes(reinterpret_cast<const char*>(&scale), 4);
  one_bit_bytes += std::string("\xa0\0\0\0", 4);  // +, -, +, -
  Seed("pushpull_framing", "push_1bit", 1 | (30 << 2),
       Flatten(kv::EncodeWithPayload(one_bit, v1::PushPullRequest::kDataFieldNumber, grpc::Slice(one_bit_bytes))));
  v1::PushPullRequest fp16 = push;
  fp16.set_compression(v1::COMPRESSION_FP16);
  const char halves[8] = {0x00, 0x38, 0x00, static_cast<char>(0xbd), 0x00, 0x42, 0x19, 0x14};  // 0.5 -1.25 3 ~1e-3
  Seed("pushpull_framing", "push_fp16", 0,
       Flatten(kv::EncodeWithPayload(fp16, v1::PushPullRequest::kDataFieldNumber, grpc::Slice(halves, 8))));
  // Requests the target's server answers with data (pushpull_framing_fuzzer.cc: the
  // request id picks the store): a push-pull of step 0 that merges at once and is
  // answered with the fp16-packed change (request id 2: sync, one worker, fp16 pull
  // compression), a pull of key 5 (8: sync, two workers), an async push of key 0 (1).
  v1::PushPullRequest merged = push;
  merged.set_worker_rank(0);
  merged.set_step(0);
  merged.set_min_version(0);
  merged.set_pull_delta(true);
  Seed("pushpull_framing", "push_pull_merged", 0,
       Flatten(kv::EncodeWithPayload(merged, v1::PushPullRequest::kDataFieldNumber, kv::CopyToSlice(grad.data(), 4))));
  v1::PushPullRequest answered = pull;
  answered.set_request_id(8);
  answered.set_min_version(0);
  answered.set_dtype(v1::DTYPE_FLOAT32);
  Seed("pushpull_framing", "pull_answered", 0, answered.SerializeAsString());
  v1::PushPullRequest async = push;
  async.set_request_id(1);
  async.set_op(v1::OP_PUSH);
  async.set_key(0);
  async.set_step(3);
  Seed("pushpull_framing", "push_async", 1 | (16 << 2),
       Flatten(kv::EncodeWithPayload(async, v1::PushPullRequest::kDataFieldNumber, kv::CopyToSlice(grad.data(), 1))));
}

void Checkpoint(const std::string& tmp) {
  std::vector<checkpoint::NamedTensor> tensors = {
      {"fc1.weight", {2, 3}, {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f}},
      {"fc1.bias", {2}, {0.0f, 1.0f}},
      {"scalar", {}, {7.0f}},
  };
  const std::string params = tmp + "/m-0001.params";
  if (!checkpoint::WriteParams(params, tensors).ok()) std::exit(1);
  const std::string p = Slurp(params);
  // Options: (options & 0x7f) % 3 = 0 params, 1 states, 2 symbol; 0x80 = append the CRC.
  Seed("checkpoint", "params", 0, p);
  Seed("checkpoint", "params_body", 0x80, p.substr(0, p.size() - 4));

  checkpoint::OptimizerStates states;
  states.optimizer = "adam";
  kv::KeyState k1;
  k1.key = 0;
  k1.version = 12;
  k1.optimizer_state = {0.01f, 0.02f, 0.03f, 0.04f};
  kv::KeyState k2;
  k2.key = (uint64_t{1} << 24) | 2;
  k2.version = 12;
  states.keys = {k1, k2};
  const std::string st = tmp + "/m-0001.states";
  if (!checkpoint::WriteStates(st, states).ok()) std::exit(1);
  const std::string s = Slurp(st);
  Seed("checkpoint", "states", 1, s);
  Seed("checkpoint", "states_body", 0x81, s.substr(0, s.size() - 4));
  // With the run record (format version 2).
  checkpoint::RunRecord run;
  run.run_id = "0123456789abcdef";
  run.network = "lenet";
  run.kv_store = "dist_sync";
  run.num_workers = 2;
  run.batch_size = 64;
  run.num_examples = 60000;
  run.seed = 42;
  states.run = run;
  if (!checkpoint::WriteStates(st, states).ok()) std::exit(1);
  const std::string s2 = Slurp(st);
  Seed("checkpoint", "states_run", 1, s2);
  Seed("checkpoint", "states_run_body", 0x81, s2.substr(0, s2.size() - 4));

  checkpoint::SymbolInfo info;
  info.network = "lenet";
  info.num_classes = 3;
  info.input_shape = {1, 28, 28};
  info.class_names = {"T-shirt/top", "Trouser", "Pullover"};
  if (!checkpoint::WriteSymbol(tmp + "/m", info).ok()) std::exit(1);
  Seed("checkpoint", "symbol", 2, Slurp(checkpoint::SymbolPath(tmp + "/m")));
  info.run_id = "0123456789abcdef";
  if (!checkpoint::WriteSymbol(tmp + "/m", info).ok()) std::exit(1);
  Seed("checkpoint", "symbol_run", 2, Slurp(checkpoint::SymbolPath(tmp + "/m")));
}

std::string Idx(std::vector<uint32_t> dims, uint8_t first_value) {
  std::string out = {0, 0, 8, static_cast<char>(dims.size())};
  size_t n = 1;
  for (uint32_t d : dims) {
    for (int i = 3; i >= 0; --i) out.push_back(static_cast<char>(d >> (8 * i)));
    n *= d;
  }
  for (size_t i = 0; i < n; ++i) out.push_back(static_cast<char>(first_value + i * 37));
  return out;
}

std::string Gzip(const std::string& in) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::exit(1);
  std::string out(deflateBound(&zs, in.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) std::exit(1);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

void IdxSeeds() {
  // Options: % 4 = 0 plain name, 1 .gz name, 2 image set (u32 LE images length first), 3 predict.
  const std::string images = Idx({2, 4, 3}, 1), labels = Idx({2}, 3);
  std::string labels_bad = labels;
  labels_bad.back() = 11;
  Seed("idx", "images", 0, images);
  Seed("idx", "labels", 0, labels);
  Seed("idx", "images_gz", 1, Gzip(images));
  Seed("idx", "images_gz_two_members", 1, Gzip(images.substr(0, 10)) + Gzip(images.substr(10)));
  Seed("idx", "matrix", 0, Idx({3, 2}, 5));
  Seed("idx", "four_dims", 0, Idx({1, 2, 1, 2}, 5));
  auto set = [](const std::string& a, const std::string& b) {
    std::string out;
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(a.size() >> (8 * i)));
    return out + a + b;
  };
  Seed("idx", "image_set", 2, set(images, labels));
  Seed("idx", "image_set_gz", 2, set(Gzip(images), Gzip(labels)));
  Seed("idx", "image_set_bad_label", 2, set(images, labels_bad));
  Seed("idx", "predict_images", 3, Idx({2, 30, 20}, 9));
  Seed("idx", "predict_small", 3, Idx({1, 5, 7}, 200));
}

void PngSeeds(const std::string& tmp) {
  // Options: bit 0 = fix chunk CRCs, bit 1 = target size from bits 2-7.
  predict::GrayImage gray;
  gray.width = 9;
  gray.height = 6;
  for (int i = 0; i < gray.width * gray.height; ++i) gray.pixels.push_back(static_cast<uint8_t>(i * 4));
  if (!predict::WritePngGray(gray, tmp + "/gray.png").ok()) std::exit(1);
  const std::string g = Slurp(tmp + "/gray.png");
  Seed("predict_image", "gray", 0, g);
  Seed("predict_image", "gray_fix_crc", 1, g);
  Seed("predict_image", "gray_to_10x19", 1 | 2 | (1 << 2) | (2 << 5), g);

  // Colour with alpha, light background: the ARGB32 and inversion paths.
  cairo_surface_t* s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 7, 5);
  cairo_t* cr = cairo_create(s);
  cairo_set_source_rgba(cr, 1, 1, 0.9, 1);
  cairo_paint(cr);
  cairo_set_source_rgba(cr, 0.8, 0.1, 0.2, 0.5);
  cairo_rectangle(cr, 2, 1, 3, 3);
  cairo_fill(cr);
  cairo_destroy(cr);
  if (cairo_surface_write_to_png(s, (tmp + "/argb.png").c_str()) != CAIRO_STATUS_SUCCESS) std::exit(1);
  cairo_surface_destroy(s);
  Seed("predict_image", "argb", 1, Slurp(tmp + "/argb.png"));
  cairo_surface_t* a8 = cairo_image_surface_create(CAIRO_FORMAT_A8, 4, 4);
  if (cairo_surface_write_to_png(a8, (tmp + "/a8.png").c_str()) != CAIRO_STATUS_SUCCESS) std::exit(1);
  cairo_surface_destroy(a8);
  Seed("predict_image", "alpha_only", 1, Slurp(tmp + "/a8.png"));
}

// CIFAR-10 binary records (dtrain writes none: built here as the archive has them):
// a label byte, then the 32 x 32 red, green and blue planes.
std::string CifarBatch(const std::vector<uint8_t>& labels) {
  std::string out;
  for (size_t r = 0; r < labels.size(); ++r) {
    out.push_back(static_cast<char>(labels[r]));
    for (size_t i = 0; i < 3 * 32 * 32; ++i) out.push_back(static_cast<char>(r * 101 + i * 37));
  }
  return out;
}

void CifarSeeds() {
  // Options: % 4 = 0 batch, 1 data set (u32 LE batch length first, then the names file;
  // bit 2 classes.txt, bit 3 no names file), 2 names file, 3 predict (bit 2 colour,
  // bits 3-7 side - 1).
  const std::string two = CifarBatch({3, 9}), one = CifarBatch({1});
  Seed("cifar", "batch", 0, two);
  Seed("cifar", "batch_label_10", 0, CifarBatch({2, 10}));
  Seed("cifar", "batch_truncated", 0, two.substr(0, two.size() - 5));
  const std::string meta = "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n\n";
  auto set = [](const std::string& batch, const std::string& names) {
    std::string out;
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(batch.size() >> (8 * i)));
    return out + batch + names;
  };
  Seed("cifar", "dataset_meta", 1, set(one, meta));
  Seed("cifar", "dataset_classes_txt", 1 | 4, set(one, "a\n b \nc\n"));
  Seed("cifar", "dataset_own_names", 1 | 8, set(one, ""));
  Seed("cifar", "names", 2, meta);
  Seed("cifar", "names_gap", 2, "cat\n\ndog\n");
  Seed("cifar", "predict_colour_32", 3 | 4 | (31 << 3), two);
  Seed("cifar", "predict_gray_28", 3 | (27 << 3), one);
}

void FlagSeeds() {
  auto line = [](std::vector<std::string> env, std::vector<std::string> args) {
    std::string out;
    for (const auto& e : env) out += e + '\0';
    out += '\0';
    for (size_t i = 0; i < args.size(); ++i) out += (i ? std::string(1, '\0') : "") + args[i];
    return out;
  };
  // Option bit 0: positional arguments accepted.
  Seed("flags", "train", 0,
       line({}, {"--kv-store=dist_sync", "--num-epochs", "3", "--lr", "0.05", "--lr_step_epochs=10,20", "--verbose"}));
  Seed("flags", "env", 0,
       line({"DTRAIN_KV_STORE=dist_async", "DMLC_KV_STORE=local", "DTRAIN_LR=1e-3", "DTRAIN_VERBOSE=true",
             "DTRAIN_NUM_EPOCHS=2"},
            {"--no-verbose"}));
  Seed("flags", "positional", 1, line({}, {"--lr=0.1", "a.png", "b.png", "--", "--num-epochs", "x"}));
  Seed("flags", "bad", 0, line({"DTRAIN_NUM_EPOCHS=three"}, {"--num-epochs=1e3", "--unknown", "--help"}));
}

}  // namespace
}  // namespace dtrain::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR (writes DIR/<target>/<seed>)\n", argv[0]);
    return 2;
  }
  using namespace dtrain::fuzz;
  g_root = argv[1];
  std::string tmp = std::filesystem::temp_directory_path().string() + "/dtrain-seeds-XXXXXX";
  if (mkdtemp(tmp.data()) == nullptr) return 1;
  Framing();
  Checkpoint(tmp);
  IdxSeeds();
  PngSeeds(tmp);
  FlagSeeds();
  CifarSeeds();
  std::filesystem::remove_all(tmp);
  return 0;
}
