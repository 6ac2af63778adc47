// `dtrain export PREFIX --epoch N [--format safetensors] [--output FILE]`: one epoch's
// weights (PREFIX-NNNN.params) in a format other tools load, e.g. Python's
//   safetensors.numpy.load_file("model/mnist-0003.safetensors")["conv1.weight"]
// Nothing is written unless the checkpoint reads back intact; the output is written
// atomically (a reader never sees half a file).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/safetensors.h"
#include "common/flags.h"
#include "services/launcher/commands.h"

namespace dtrain::launcher {
namespace {

struct ExportFlags {
  std::string prefix;
  int64_t epoch = -1;
  std::string format = "safetensors";
  std::string output;  // default PREFIX-NNNN.safetensors
};

absl::Status ParseExportFlags(const std::vector<std::string>& args, ExportFlags* f, bool* help) {
  FlagSet flags("dtrain export",
                "Writes the weights of checkpoint PREFIX-NNNN.params (as written by the workers'\n"
                "--model-prefix PREFIX) in a format other tools read, with the model's parameter names.\n"
                "Usage: dtrain export PREFIX --epoch N [--format safetensors] [--output FILE]\n"
                "   or: dtrain export --model-prefix PREFIX --epoch N [...]");
  // Every other command names the prefix --model-prefix: both spellings work here.
  std::string model_prefix;
  flags.AddString("model-prefix", &model_prefix,
                  "the checkpoints' prefix, as the workers' --model-prefix (or as "
                  "the one positional argument)");
  flags.AddInt("epoch", &f->epoch, "the checkpoint's epoch (NNNN in PREFIX-NNNN.params); required");
  flags.AddString("format", &f->format, "output format: safetensors (the only one so far)");
  flags.AddString("output", &f->output, "the file to write (default PREFIX-NNNN.safetensors)");
  std::vector<std::string> positional;
  absl::Status s = flags.Parse(args, &positional);
  *help = flags.help_requested();
  if (*help) std::fputs(flags.Usage().c_str(), stdout);
  if (!s.ok() || *help) return s;
  if (!model_prefix.empty()) {
    if (!positional.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("the prefix is given twice: --model-prefix ", model_prefix,
                                                     " and '", positional[0], "'; give one"));
    }
    positional.push_back(model_prefix);
  }
  if (positional.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected one PREFIX (as given to the workers' --model-prefix), got ", positional.size()));
  }
  f->prefix = positional[0];
  if (f->epoch < 0 || f->epoch > 9999) {
    return absl::InvalidArgumentError("--epoch N is required, 0..9999 (the NNNN of PREFIX-NNNN.params)");
  }
  if (f->format != "safetensors") {
    return absl::InvalidArgumentError(absl::StrCat("--format must be safetensors, got '", f->format, "'"));
  }
  if (f->output.empty()) f->output = checkpoint::SafetensorsPath(f->prefix, static_cast<int>(f->epoch));
  return absl::OkStatus();
}

}  // namespace

int ExportCommand(const std::vector<std::string>& args) {
  ExportFlags f;
  bool help = false;
  if (absl::Status s = ParseExportFlags(args, &f, &help); !s.ok()) {
    std::fprintf(stderr, "dtrain export: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (help) return 0;
  if (absl::Status s = checkpoint::ExportSafetensors(f.prefix, static_cast<int>(f.epoch), f.output); !s.ok()) {
    std::fprintf(stderr, "dtrain export: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::printf("wrote %s (epoch %d of %s)\n", f.output.c_str(), static_cast<int>(f.epoch), f.prefix.c_str());
  return 0;
}

}  // namespace dtrain::launcher
