// The Open Inference Protocol's checks: every refusal names the field and what was
// expected, sizes and counts from the wire are checked before use, and answers carry
// the right names, shapes and datatypes.
#include "services/inference/open_inference_codec.h"

#include <cmath>
#include <cstring>
#include <functional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::inference {
namespace {

using ::inference::ModelInferRequest;
using ::inference::ModelInferResponse;
using ::inference::ModelMetadataResponse;
using ::testing::HasSubstr;

ModelMeta Lenet() {
  ModelMeta m;
  m.network = "lenet";
  m.num_classes = 10;
  m.input_shape = {1, 28, 28};
  m.epoch = 3;
  return m;
}

// `n` FP32 images in raw_input_contents, every pixel 0.5.
ModelInferRequest RawRequest(int64_t n, const std::vector<int64_t>& image_shape = {1, 28, 28}) {
  ModelInferRequest req;
  req.set_model_name("m");
  auto* in = req.add_inputs();
  in->set_name("images");
  in->set_datatype("FP32");
  in->add_shape(n);
  int64_t count = n;
  for (int64_t d : image_shape) {
    in->add_shape(d);
    count *= d;
  }
  std::vector<float> pixels(static_cast<size_t>(count), 0.5f);
  req.add_raw_input_contents(reinterpret_cast<const char*>(pixels.data()), pixels.size() * sizeof(float));
  return req;
}

absl::Status Parse(const ModelInferRequest& req, int64_t max_batch = 64) {
  std::string scratch;
  return ParseInferRequest(req, Lenet(), max_batch, &scratch).status();
}

TEST(OpenInferenceCodecTest, ModelRefsResolveByNameAndEpochVersion) {
  const ModelMeta meta = Lenet();
  EXPECT_TRUE(CheckModelRef("m", "", "m", &meta).ok());
  EXPECT_TRUE(CheckModelRef("m", "3", "m", &meta).ok());
  absl::Status s = CheckModelRef("other", "", "m", &meta);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("unknown model 'other': this server serves 'm'"));
  s = CheckModelRef("m", "2", "m", &meta);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("version '2' is not loaded: the serving version is 3"));
  EXPECT_EQ(CheckModelRef("m", "1", "m", nullptr).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(DefaultModelName("model/fmnist-lenet"), "fmnist-lenet");
  EXPECT_EQ(DefaultModelName("m"), "m");
}

TEST(OpenInferenceCodecTest, MetadataNamesTheTensorsWithShapesAndDatatypes) {
  ModelMetadataResponse md;
  FillModelMetadata("m", Lenet(), &md);
  EXPECT_EQ(md.name(), "m");
  ASSERT_EQ(md.versions_size(), 1);
  EXPECT_EQ(md.versions(0), "3");
  EXPECT_EQ(md.platform(), "pytorch_libtorch");
  ASSERT_EQ(md.inputs_size(), 1);
  EXPECT_EQ(md.inputs(0).name(), "images");
  EXPECT_EQ(md.inputs(0).datatype(), "FP32");
  EXPECT_THAT(std::vector<int64_t>(md.inputs(0).shape().begin(), md.inputs(0).shape().end()),
              ::testing::ElementsAre(-1, 1, 28, 28));
  ASSERT_EQ(md.outputs_size(), 2);
  EXPECT_EQ(md.outputs(0).name(), "logits");
  EXPECT_EQ(md.outputs(1).name(), "probabilities");
  for (const auto& o : md.outputs()) {
    EXPECT_EQ(o.datatype(), "FP32");
    EXPECT_THAT(std::vector<int64_t>(o.shape().begin(), o.shape().end()), ::testing::ElementsAre(-1, 10));
  }
}

TEST(OpenInferenceCodecTest, AcceptsRawTypedUint8AndChannelDroppedShapes) {
  std::string scratch;
  auto raw = ParseInferRequest(RawRequest(2), Lenet(), 64, &scratch);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_TRUE(raw->raw);
  EXPECT_EQ(raw->images.count, 2);
  EXPECT_EQ(raw->outputs.size(), 2u);  // none asked for: all

  ModelInferRequest typed = RawRequest(1, {28, 28});
  typed.clear_raw_input_contents();
  for (int i = 0; i < 784; ++i) typed.mutable_inputs(0)->mutable_contents()->add_fp32_contents(0.25f);
  typed.add_outputs()->set_name("probabilities");
  auto t = ParseInferRequest(typed, Lenet(), 64, &scratch);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->raw);
  EXPECT_EQ(t->images.type, PixelType::kFloat32);
  ASSERT_EQ(t->outputs.size(), 1u);
  EXPECT_EQ(t->outputs[0], OipOutput::kProbabilities);
  float first;
  std::memcpy(&first, t->images.data.data(), sizeof(float));
  EXPECT_EQ(first, 0.25f);

  ModelInferRequest bytes = RawRequest(1);
  bytes.mutable_inputs(0)->set_datatype("UINT8");
  bytes.set_raw_input_contents(0, std::string(784, '\x80'));
  auto u = ParseInferRequest(bytes, Lenet(), 64, &scratch);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->images.type, PixelType::kUint8);
}

TEST(OpenInferenceCodecTest, RefusesWrongInputsWithClearMessages) {
  struct Case {
    const char* what;
    std::function<void(ModelInferRequest&)> spoil;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"no input", [](ModelInferRequest& r) { r.clear_inputs(); },
       "has 0 input tensors; the model takes one: 'images' FP32 [-1,1,28,28]"},
      {"two inputs", [](ModelInferRequest& r) { *r.add_inputs() = r.inputs(0); }, "has 2 input tensors"},
      {"wrong name", [](ModelInferRequest& r) { r.mutable_inputs(0)->set_name("x"); },
       "unknown input 'x': the model takes 'images'"},
      {"wrong datatype", [](ModelInferRequest& r) { r.mutable_inputs(0)->set_datatype("INT64"); },
       "datatype 'INT64'; the model takes FP32"},
      {"wrong image shape", [](ModelInferRequest& r) { r.mutable_inputs(0)->set_shape(2, 27); },
       "has shape [2,1,27,28]; the model takes 'images' FP32 [-1,1,28,28]"},
      {"wrong rank", [](ModelInferRequest& r) { r.mutable_inputs(0)->mutable_shape()->RemoveLast(); },
       "has shape [2,1,28]"},
      {"zero batch", [](ModelInferRequest& r) { r.mutable_inputs(0)->set_shape(0, 0); },
       "the batch dimension must be at least 1"},
      {"negative batch", [](ModelInferRequest& r) { r.mutable_inputs(0)->set_shape(0, -5); },
       "the batch dimension must be at least 1"},
      {"huge batch", [](ModelInferRequest& r) { r.mutable_inputs(0)->set_shape(0, int64_t{1} << 60); },
       "over the limit of 64"},
      {"huge image dim", [](ModelInferRequest& r) { r.mutable_inputs(0)->set_shape(2, int64_t{1} << 62); },
       "the model takes"},
      {"short raw", [](ModelInferRequest& r) { r.mutable_raw_input_contents(0)->resize(100); },
       "raw_input_contents[0] has 100 bytes; input 'images' FP32 [2,1,28,28] needs 6272"},
      {"long raw", [](ModelInferRequest& r) { r.mutable_raw_input_contents(0)->append("x"); }, "has 6273 bytes"},
      {"raw count", [](ModelInferRequest& r) { r.add_raw_input_contents("x"); },
       "raw_input_contents has 2 entries for 1 input(s)"},
      {"raw and typed", [](ModelInferRequest& r) { r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1); },
       "both contents and raw_input_contents"},
      {"typed count",
       [](ModelInferRequest& r) {
         r.clear_raw_input_contents();
         r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1);
       },
       "needs 1568 values in contents.fp32_contents (or raw_input_contents); it has 1"},
      {"typed wrong field",
       [](ModelInferRequest& r) {
         r.clear_raw_input_contents();
         for (int i = 0; i < 1568; ++i) r.mutable_inputs(0)->mutable_contents()->add_int64_contents(1);
       },
       "it has 0 there and 1568 in other fields"},
      {"NaN pixel",
       [](ModelInferRequest& r) {
         float nan = std::nanf("");
         std::memcpy(r.mutable_raw_input_contents(0)->data() + 4 * 800, &nan, 4);
       },
       "image 1 pixel 16 is NaN"},
      {"unknown output", [](ModelInferRequest& r) { r.add_outputs()->set_name("classes"); },
       "unknown output 'classes': the model has 'logits' and 'probabilities'"},
      {"output twice",
       [](ModelInferRequest& r) {
         r.add_outputs()->set_name("logits");
         r.add_outputs()->set_name("logits");
       },
       "output 'logits' is requested twice"},
  };
  for (const Case& c : cases) {
    ModelInferRequest req = RawRequest(2);
    c.spoil(req);
    absl::Status s = Parse(req);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.what << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.what;
  }
  ModelInferRequest big = RawRequest(1);
  big.mutable_inputs(0)->set_datatype("UINT8");
  big.clear_raw_input_contents();
  for (int i = 0; i < 784; ++i) big.mutable_inputs(0)->mutable_contents()->add_uint_contents(i == 5 ? 256 : 1);
  EXPECT_THAT(Parse(big).message(), HasSubstr("UINT8 value 5 is 256, over 255"));
}

TEST(OpenInferenceCodecTest, AnswersRawForRawRequestsAndTypedOtherwise) {
  ClassOutputs out;
  out.images = 1;
  out.num_classes = 2;
  out.logits = {1.5f, -2};
  out.probabilities = {0.9f, 0.1f};
  std::string scratch;
  ModelInferRequest req = RawRequest(1);
  req.set_id("req-7");
  auto raw = ParseInferRequest(req, Lenet(), 64, &scratch);
  ASSERT_TRUE(raw.ok());
  ModelInferResponse resp;
  FillInferResponse(req, "m", Lenet(), *raw, out, &resp);
  EXPECT_EQ(resp.model_name(), "m");
  EXPECT_EQ(resp.model_version(), "3");
  EXPECT_EQ(resp.id(), "req-7");
  ASSERT_EQ(resp.outputs_size(), 2);
  ASSERT_EQ(resp.raw_output_contents_size(), 2);
  EXPECT_EQ(resp.outputs(0).name(), "logits");
  EXPECT_EQ(resp.outputs(0).datatype(), "FP32");
  EXPECT_THAT(std::vector<int64_t>(resp.outputs(0).shape().begin(), resp.outputs(0).shape().end()),
              ::testing::ElementsAre(1, 2));
  float logits[2];
  ASSERT_EQ(resp.raw_output_contents(0).size(), sizeof(logits));
  std::memcpy(logits, resp.raw_output_contents(0).data(), sizeof(logits));
  EXPECT_EQ(logits[0], 1.5f);
  EXPECT_EQ(logits[1], -2.0f);

  OipInferInput typed = *raw;
  typed.raw = false;
  typed.outputs = {OipOutput::kProbabilities};
  ModelInferResponse t;
  FillInferResponse(req, "m", Lenet(), typed, out, &t);
  EXPECT_EQ(t.raw_output_contents_size(), 0);
  ASSERT_EQ(t.outputs_size(), 1);
  EXPECT_EQ(t.outputs(0).name(), "probabilities");
  EXPECT_THAT(std::vector<float>(t.outputs(0).contents().fp32_contents().begin(),
                                 t.outputs(0).contents().fp32_contents().end()),
              ::testing::ElementsAre(0.9f, 0.1f));
}

}  // namespace
}  // namespace dtrain::inference
