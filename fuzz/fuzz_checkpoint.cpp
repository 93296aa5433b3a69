// Any file handed to the checkpoint reader (`--resume`, `--init` with match_init_weights,
// `inspect`): a clear InputError or a valid read, never a crash or an internal error.
#include "chimera/core/error.hpp"
#include "chimera/io/checkpoint.hpp"
#include "chimera/io/init_weights.hpp"
#include "fuzz_input_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = chimera::fuzz::write_input(data, size, "-checkpoint.h5");
  try {
    const chimera::io::CheckpointReader reader(path);
    try {
      (void)reader.meta();
    } catch (const chimera::InputError&) {
    }
    const auto entries = reader.entries();
    for (const auto& e : entries) {
      if (!chimera::io::is_readable_float(e.dtype) || e.spec.numel() > (1 << 20)) continue;
      std::vector<float> values(static_cast<std::size_t>(e.spec.numel()));
      reader.read(e.spec.name, values);
    }
    const std::vector<chimera::io::TensorSpec> expected{{"wte.weight", {16, 8}},
                                                        {"ln_f.bias", {8}}};
    try {
      (void)chimera::io::match_init_weights(reader, expected);
    } catch (const chimera::InputError&) {
    }
    reader.expect(expected);
  } catch (const chimera::InputError&) {
  }
  return 0;
}
