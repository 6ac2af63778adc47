// `dtrain predict`: flags only; the work is in services/predict (RunPredict).
//
//   dtrain predict --server 127.0.0.1:9000 --images t10k-images-idx3-ubyte.gz \
//       --labels t10k-labels-idx1-ubyte.gz --limit 1000 --render predictions.png
//   dtrain predict --server 127.0.0.1:9000 shoe.png shirt.png
#include <cstdio>

#include "common/flags.h"
#include "common/tls/tls_flags.h"
#include "services/launcher/commands.h"
#include "services/predict/predict_job.h"

namespace dtrain::launcher {

int PredictCommand(const std::vector<std::string>& args) {
  predict::PredictOptions o;
  FlagSet flags("dtrain predict",
                "Classifies images with a dtrain-infer server: IDX files (--images, --labels), a CIFAR-10\n"
                "batch (--images test_batch.bin, labels included) or PNG files given as arguments, each\n"
                "converted to the served model's [C,H,W]. Prints one line per image, the accuracy when labels\n"
                "are known, and with --render a grid picture of the images and answers.");
  flags.AddString("server", &o.server, "HOST:PORT of dtrain-infer", {"DTRAIN_INFER_SERVER"});
  flags.AddString("images", &o.images, "IDX image file (raw or .gz), or a CIFAR-10 binary batch (*.bin)");
  flags.AddString("labels", &o.labels, "IDX label file for --images (enables accuracy)");
  flags.AddInt("limit", &o.limit, "only the first N images of --images (0 = all)");
  flags.AddString("invert", &o.invert,
                  "PNGs for a one-channel model: make them light-on-dark like the data: auto|yes|no");
  flags.AddString("render", &o.render, "write a PNG grid of the images with their predictions here");
  flags.AddInt("render-limit", &o.render_limit, "images drawn in the --render picture");
  flags.AddInt("batch", &o.batch, "images per Predict call (capped at the server's maximum)");
  flags.AddInt("top-k", &o.top_k, "classes printed per image");
  flags.AddDouble("timeout", &o.timeout_s, "seconds each Predict call may take");
  flags.AddDouble("wait", &o.wait_s, "seconds to wait for the server to have a model");
  flags.AddString("auth-token-file", &o.auth_token_file,
                  "send the first token in this file as a bearer token (a server with --auth-token-file)",
                  {"DTRAIN_AUTH_TOKEN_FILE"});
  TlsFlags tls;
  AddTlsFlags(flags, &tls);
  absl::Status s = flags.Parse(args, &o.pngs);
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    return 0;
  }
  if (s.ok()) s = predict::CheckOptions(o);
  // TLS: --tls-ca checks the server; --tls-cert/--tls-key present a client certificate.
  if (s.ok()) s = ApplyTlsFlags(tls, TlsUse::kClient, /*listen_host=*/"");
  if (!s.ok()) {
    std::fprintf(stderr, "dtrain predict: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  s = predict::RunPredict(o, stdout);
  if (!s.ok()) {
    std::fprintf(stderr, "dtrain predict: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace dtrain::launcher
