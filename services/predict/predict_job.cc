#include "services/predict/predict_job.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/tls/token_file.h"
#include "services/predict/grid_render.h"
#include "services/predict/gray_image.h"
#include "services/predict/inference_client.h"
#include "services/predict/png_io.h"
#include "common/data/cifar_reader.h"
#include "common/data/idx_reader.h"
#include "services/predict/model_image.h"

namespace dtrain::predict {
namespace {

struct Input {
  std::string name;
  ModelImage image;  // as sent: the model's channels x height x width
  int label = -1;    // -1: unknown
};

// The served model's input, from its symbol file (ModelInfo's input_shape).
struct InputShape {
  int channels = 1, height = 0, width = 0;
  // As sent: [H, W] for one channel (what the server has always taken), else [C, H, W].
  std::vector<int64_t> Wire() const {
    if (channels == 1) return {height, width};
    return {channels, height, width};
  }
};

struct Answer {
  std::vector<v1::ClassScore> top;  // most probable first
  int epoch = 0;
};

bool IsCifarBatch(const std::string& path) { return path.size() > 4 && path.compare(path.size() - 4, 4, ".bin") == 0; }

// A CIFAR-10 binary batch (test_batch.bin): the images with their labels.
absl::StatusOr<std::vector<Input>> LoadCifar(const PredictOptions& o, const InputShape& shape) {
  DTRAIN_ASSIGN_OR_RETURN(data::ImageSet set, data::ReadCifarBatch(o.images));
  const int64_t count = o.limit > 0 ? std::min(o.limit, set.count) : set.count;
  const size_t per_image = static_cast<size_t>(set.channels * set.rows * set.cols);
  std::vector<Input> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    ModelImage img;
    img.channels = static_cast<int>(set.channels);
    img.height = static_cast<int>(set.rows);
    img.width = static_cast<int>(set.cols);
    const auto first = set.pixels.begin() + static_cast<std::ptrdiff_t>(i * per_image);
    img.pixels.assign(first, first + static_cast<std::ptrdiff_t>(per_image));
    Input& in = out[static_cast<size_t>(i)];
    in.name = absl::StrCat("#", i);
    in.image = FitToInput(img, shape.channels, shape.height, shape.width);
    in.label = set.labels[static_cast<size_t>(i)];
  }
  return out;
}

absl::StatusOr<std::vector<Input>> LoadIdx(const PredictOptions& o, const InputShape& shape) {
  DTRAIN_ASSIGN_OR_RETURN(data::IdxArray images, data::ReadIdx(o.images));
  if (images.dims.size() != 3 || images.dims[0] < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(o.images, ": want IDX images [N, rows, cols], found ", images.dims.size(), " dimensions"));
  }
  const int64_t n = images.dims[0], rows = images.dims[1], cols = images.dims[2];
  data::IdxArray labels;
  if (!o.labels.empty()) {
    DTRAIN_ASSIGN_OR_RETURN(labels, data::ReadIdx(o.labels));
    if (labels.dims.size() != 1 || labels.dims[0] != n) {
      return absl::InvalidArgumentError(absl::StrCat(o.labels, ": want ", n, " labels (one per image in ", o.images,
                                                     "), found dimensions [", absl::StrJoin(labels.dims, ","), "]"));
    }
  }
  const int64_t count = o.limit > 0 ? std::min(o.limit, n) : n;
  std::vector<Input> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    GrayImage img;
    img.width = static_cast<int>(cols);
    img.height = static_cast<int>(rows);
    const auto* first = images.data.data() + i * rows * cols;
    img.pixels.assign(first, first + rows * cols);
    Input& in = out[static_cast<size_t>(i)];
    in.name = absl::StrCat("#", i);
    in.image = FitToInput(img, shape.channels, shape.height, shape.width);
    if (!o.labels.empty()) in.label = labels.data[static_cast<size_t>(i)];
  }
  return out;
}

// Gray models get gray pictures, inverted as --invert says (Fashion-MNIST is light on
// dark); colour models get the colours as they are.
absl::StatusOr<std::vector<Input>> LoadPngs(const PredictOptions& o, const InputShape& shape) {
  std::vector<Input> out;
  for (const std::string& path : o.pngs) {
    if (shape.channels == 1) {
      DTRAIN_ASSIGN_OR_RETURN(GrayImage img, ReadPngGray(path));
      if (o.invert == "yes" || (o.invert == "auto" && HasLightBackground(img))) Invert(&img);
      out.push_back({path, FitToInput(img, 1, shape.height, shape.width), -1});
    } else {
      DTRAIN_ASSIGN_OR_RETURN(ModelImage img, ReadPngRgb(path));
      out.push_back({path, FitToInput(img, shape.channels, shape.height, shape.width), -1});
    }
  }
  return out;
}

std::string ClassName(const v1::ModelInfoResponse& info, int id) {
  if (id >= 0 && id < info.class_names_size()) return info.class_names(id);
  return absl::StrCat("class ", id);
}

absl::StatusOr<std::vector<Answer>> Ask(InferenceClient& client, const std::vector<Input>& inputs,
                                        const PredictOptions& o, int64_t batch, const InputShape& shape) {
  std::vector<Answer> answers;
  answers.reserve(inputs.size());
  std::vector<uint8_t> pixels;
  for (size_t start = 0; start < inputs.size(); start += static_cast<size_t>(batch)) {
    const size_t end = std::min(inputs.size(), start + static_cast<size_t>(batch));
    pixels.clear();
    for (size_t i = start; i < end; ++i) {
      pixels.insert(pixels.end(), inputs[i].image.pixels.begin(), inputs[i].image.pixels.end());
    }
    DTRAIN_ASSIGN_OR_RETURN(v1::PredictResponse resp,
                            client.Predict(pixels, static_cast<int64_t>(end - start), shape.Wire(),
                                           static_cast<int>(o.top_k), absl::Seconds(o.timeout_s)));
    for (const v1::Prediction& p : resp.predictions()) {
      if (p.top_size() == 0) return absl::InternalError("server answered an image with no classes");
      answers.push_back({{p.top().begin(), p.top().end()}, resp.epoch()});
    }
  }
  return answers;
}

}  // namespace

absl::Status CheckOptions(const PredictOptions& o) {
  auto bad = [](const std::string& m) { return absl::InvalidArgumentError(m); };
  if (o.server.empty()) return bad("--server HOST:PORT is required");
  if (o.images.empty() == o.pngs.empty()) {
    return bad("give either --images IDX-FILE (with optional --labels) or PNG files, not both or neither");
  }
  if (!o.labels.empty() && o.images.empty()) return bad("--labels needs --images");
  if (!o.labels.empty() && IsCifarBatch(o.images)) {
    return bad("--labels is for IDX images: a CIFAR-10 batch (.bin) carries its labels");
  }
  if (o.invert != "auto" && o.invert != "yes" && o.invert != "no") {
    return bad(absl::StrCat("--invert must be auto, yes or no, not \"", o.invert, "\""));
  }
  if (o.limit < 0) return bad("--limit must be >= 0 (0 = all)");
  if (o.batch < 1) return bad("--batch must be >= 1");
  if (o.top_k < 1) return bad("--top-k must be >= 1");
  if (o.render_limit < 1) return bad("--render-limit must be >= 1");
  if (!(o.timeout_s > 0) || !(o.wait_s >= 0)) return bad("--timeout must be > 0 and --wait >= 0");
  return absl::OkStatus();
}

absl::Status RunPredict(const PredictOptions& o, std::FILE* out) {
  DTRAIN_RETURN_IF_ERROR(CheckOptions(o));
  std::string token;
  if (!o.auth_token_file.empty()) {
    absl::StatusOr<std::vector<std::string>> tokens = ReadTokenFile(o.auth_token_file, "--auth-token-file");
    if (!tokens.ok()) return tokens.status();
    token = tokens->front();
  }
  InferenceClient client(o.server, std::move(token));
  DTRAIN_ASSIGN_OR_RETURN(v1::ModelInfoResponse info, client.WaitForModel(absl::Seconds(o.wait_s)));
  // The shape comes from the server (its symbol file); nothing else is assumed of it.
  constexpr int64_t kMaxChannels = 64, kMaxSide = 4096;
  if (info.input_shape_size() != 3 || info.input_shape(0) < 1 || info.input_shape(0) > kMaxChannels ||
      info.input_shape(1) < 1 || info.input_shape(1) > kMaxSide || info.input_shape(2) < 1 ||
      info.input_shape(2) > kMaxSide) {
    return absl::FailedPreconditionError(
        absl::StrCat("the served ", info.network(), " model takes [", absl::StrJoin(info.input_shape(), ","),
                     "]; dtrain predict sends images [C,H,W] with C in [1, 64] and H, W in [1, 4096]"));
  }
  const InputShape shape{static_cast<int>(info.input_shape(0)), static_cast<int>(info.input_shape(1)),
                         static_cast<int>(info.input_shape(2))};
  std::vector<Input> inputs;
  if (!o.images.empty() && IsCifarBatch(o.images)) {
    DTRAIN_ASSIGN_OR_RETURN(inputs, LoadCifar(o, shape));
  } else if (!o.images.empty()) {
    DTRAIN_ASSIGN_OR_RETURN(inputs, LoadIdx(o, shape));
  } else {
    DTRAIN_ASSIGN_OR_RETURN(inputs, LoadPngs(o, shape));
  }
  const int64_t batch = std::min<int64_t>(o.batch, std::max(1, info.max_batch()));
  DTRAIN_ASSIGN_OR_RETURN(std::vector<Answer> answers, Ask(client, inputs, o, batch, shape));

  int64_t labelled = 0, right = 0;
  std::set<int> epochs;
  std::vector<GridCell> cells;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Input& in = inputs[i];
    const Answer& a = answers[i];
    epochs.insert(a.epoch);
    const v1::ClassScore& best = a.top.front();
    const bool known = in.label >= 0;
    const bool wrong = known && best.class_id() != in.label;
    labelled += known;
    right += known && !wrong;
    std::string line = absl::StrCat(in.name, "  ", best.name(), "  p=", absl::StrFormat("%.4f", best.probability()));
    for (size_t k = 1; k < a.top.size(); ++k) {
      absl::StrAppend(&line, k == 1 ? "  (then " : ", ", a.top[k].name(), " ",
                      absl::StrFormat("%.4f", a.top[k].probability()), k + 1 == a.top.size() ? ")" : "");
    }
    if (known) absl::StrAppend(&line, "  true=", ClassName(info, in.label), wrong ? "  WRONG" : "");
    std::fprintf(out, "%s\n", line.c_str());
    if (static_cast<int64_t>(cells.size()) < o.render_limit) {
      cells.push_back({in.image, best.name(), best.probability(), known ? ClassName(info, in.label) : "", wrong});
    }
  }
  const std::string model = absl::StrCat(info.network(), " epoch ", absl::StrJoin(epochs, "/"));
  std::string title = absl::StrCat("dtrain predict: ", model);
  if (labelled > 0) {
    const double accuracy = static_cast<double>(right) / static_cast<double>(labelled);
    std::fprintf(out, "accuracy=%.4f (%lld of %lld right), %s\n", accuracy, static_cast<long long>(right),
                 static_cast<long long>(labelled), model.c_str());
    absl::StrAppend(&title, ": ", right, " of ", labelled, " right (", absl::StrFormat("%.1f", 100 * accuracy), "%)");
  }
  if (!o.render.empty()) {
    absl::StrAppend(&title, cells.size() < inputs.size() ? absl::StrCat("; first ", cells.size(), " shown") : "",
                    labelled > 0 ? "; wrong in red" : "");
    DTRAIN_RETURN_IF_ERROR(RenderGrid(cells, title, o.render));
    std::fprintf(out, "picture: %s (%zu images)\n", o.render.c_str(), cells.size());
  }
  return absl::OkStatus();
}

}  // namespace dtrain::predict
